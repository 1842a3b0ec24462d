/* exit_codes.h - sdt-host's exit status contract (scripts and tests rely on it). */
#ifndef SDT_HOST_EXIT_CODES_H
#define SDT_HOST_EXIT_CODES_H

enum {
    SDT_EXIT_OK = 0,
    SDT_EXIT_ERROR = 1,        /* one clear sentence on stderr */
    SDT_EXIT_USAGE = 2,        /* bad command line */
    SDT_EXIT_INTERRUPTED = 130 /* Ctrl-C: the step finished and the state was saved; SIGTERM gives 143 and SIGHUP 129
                                * (128 + the signal, as a shell reports it) with the same saving */
};

#endif
