// llama-perplexity-flush: upstream's llama-perplexity (its llama-perplexity-impl library, as is)
// with its last lines never lost. The pinned common/log.cpp leaks its logger on purpose and prints
// from a worker thread, so a process that returns from main can end before the worker wrote the
// last chunks and the "Final estimate" line (seen here about one run in three). Pausing the logger
// queues an end marker after every pending line and joins the worker: everything is written.
//
// Same arguments and output as llama-perplexity.

#include "log.h"

int llama_perplexity(int argc, char ** argv);

int main(int argc, char ** argv) {
    const int rc = llama_perplexity(argc, argv);
    common_log_pause(common_log_main());
    return rc;
}
