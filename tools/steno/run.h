/* steno run: the command that transcribes files. */
#ifndef STENO_TOOL_RUN_H
#define STENO_TOOL_RUN_H

extern const char run_usage[];

/* `steno run ...` (argv[1] is "run"); returns the exit status. */
int run_main(int argc, char **argv);

#endif
