/* steno serve's /v1/audio/transcriptions and /v1/audio/translations once the
 * form is read: its fields checked, the model picked, the job run on that
 * model's worker, the result answered in the asked response_format. */
#ifndef STENO_TOOL_SERVE_AUDIO_H
#define STENO_TOOL_SERVE_AUDIO_H

#include <stdbool.h>

#include "serve.h"
#include "serve_form.h"
#include "serve_http.h"

/* Returns an enum MHD_Result for the access handler (the answer is queued). */
int audio_answer(struct MHD_Connection *c, serve_request *rq, const serve_config *cfg, serve_form *form,
                 bool translate, double deadline);

#endif
