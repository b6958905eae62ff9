#include <stdlib.h>

#include "base/error.h"
#include "steno.h"
#include "gpu/internal.h"

int steno_devices_print(FILE *out, const steno_model_params *params) {
  steno_model_params p = params ? *params : steno_model_default_params();
  gpu_info *infos;
  int n;
  TRY(gpu_list(&infos, &n));
  int chosen = 0;
  int st = gpu_choose(infos, n, &p, &chosen);
  for (int i = 0; i < n; i++) {
    gpu_info_print(&infos[i], out);
    if (st || i != chosen) continue;
    /* The fast kernels are used only where their probe passes on the device. */
    gpu_device *d;
    int open = gpu_open(&p, &d);
    if (open) {
      fprintf(out, "   (steno would use this device, but it could not be opened: %s)\n",
              steno_last_error());
      continue;
    }
    for (int i = 1; i < GPU_GEMM_VARIANTS; i++) {
      gpu_gemm_variant v = (gpu_gemm_variant)i;
      const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
      bool cm2 = gpu_gemm_is_cm2(v);
      fprintf(out, "   fast kernels: GEMM on cooperative matrices, %s %u×%u on %u subgroups%s %s\n",
              t->kernel, t->sg_m * t->tm * 16, t->sg_n * t->tn * 16, t->sg_m * t->sg_n,
              t->bk == 64 ? ", k by 64" : "",
              gpu_gemm_variant_ok(d, v) ? gpu_gemm_variant_used(d, v) ? "(probe passed, used)"
                                                                      : "(probe passed, slower here: not used)"
              : d->coop && (!cm2 || d->coop2)         ? "(probe FAILED: not used)"
              : cm2 && d->info.coop2 && d->coop       ? "(experimental, off: STENO_GEMM_CM2=1 turns it on)"
              : cm2 && d->coop                        ? "(cooperative_matrix2 not offered)"
                                                      : "(not offered: portable kernels)");
    }
    for (int k = 0; k < GPU_FAST_KINDS; k++) {
      gpu_fast_kernel fk = (gpu_fast_kernel)k;
      /* A kind the timing never picks is not chosen: its reason instead. */
      const char *why = gpu_fast_untimed(d, fk);
      fprintf(out, "   fast kernels: %s (%s%s)\n", gpu_fast_name(fk),
              gpu_fast_chosen(d, fk)            ? "probe passed, used"
              : gpu_fast_passed(d, fk) && why   ? "probe passed, not used: "
              : gpu_fast_passed(d, fk)          ? "probe passed, slower here: not used"
              : gpu_fast_offered(d, fk)         ? "probe FAILED: portable kernel"
                                                : "not offered: portable kernel",
              gpu_fast_passed(d, fk) && why ? why : "");
    }
    fprintf(out, "   (steno uses this device)\n");
    gpu_close(d);
  }
  free(infos);
  return st;
}
