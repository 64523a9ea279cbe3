"""The common English words the generated models give whole tokens to (gen_model.py) and the
fixed perplexity text is written in (gen_text.py): one list, no dependencies, so gen_text.py runs
with any python3."""

COMMON_WORDS = """
the of and to in is was for that on as with by he at from his it an were are which this be or
has had not but first one their its new after who they have her she two been other when there
all during into school time may years more most only over city some world would where later up
such used many can state about national out known university united then made being also
hello once upon a time there lived little girl boy cat dog house tree water day night sun
moon good bad big small old young man woman people life way back make go see come think look
want give use find tell ask work seem feel try leave call number part sound word write
""".split()
