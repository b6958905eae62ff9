/* Monotonic time for benchmarks and progress. */
#ifndef STENO_BASE_TIMER_H
#define STENO_BASE_TIMER_H

double time_now(void); /* seconds since an arbitrary point */

#endif
