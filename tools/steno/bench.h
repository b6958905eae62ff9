/* `steno bench`: load time, first call, warm latency, speed and memory. */
#ifndef STENO_TOOL_BENCH_H
#define STENO_TOOL_BENCH_H

int bench_main(int argc, char **argv);

#endif
