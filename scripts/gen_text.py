#!/usr/bin/env python3
"""Write a deterministic English-like text for llama-perplexity runs on the generated models.

    python3 scripts/gen_text.py --words 3000 --seed 1 --out text.txt

Sentences of 5 to 14 words drawn with Python's seeded `random.Random` (its integer draws are the
same on every CPython 3), from the common words gen_model.py gives pieces to, so the tiny model's
tokenizer needs few byte tokens. Paragraphs of 3 to 6 sentences. The output depends on the
arguments only; 3000 words are some 4000 tokens of the tiny or medium model.
"""
import argparse
import random

from words import COMMON_WORDS as WORDS


def text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    paragraphs, sentences, words = [], [], 0
    while words < n_words:
        n = rng.randint(5, 14)
        s = [rng.choice(WORDS) for _ in range(n)]
        sentences.append(" ".join(s).capitalize() + rng.choice([".", ".", ".", "!", "?"]))
        words += n
        if len(sentences) >= rng.randint(3, 6):
            paragraphs.append(" ".join(sentences))
            sentences = []
    if sentences:
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.out, "w") as f:
        f.write(text(a.words, a.seed))


if __name__ == "__main__":
    main()
