#include <stdlib.h>

#include "base/error.h"
#include "gpu/internal.h"

int steno_devices_print(FILE *out) {
  gpu_info *infos;
  int n;
  TRY(gpu_list(&infos, &n));
  int chosen = 0;
  int st = gpu_choose(infos, n, &chosen);
  for (int i = 0; i < n; i++) {
    gpu_info_print(&infos[i], out);
    if (!st && i == chosen) fprintf(out, "   (steno uses this device)\n");
  }
  free(infos);
  return st;
}
