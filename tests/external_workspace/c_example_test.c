/* The C API from another workspace, from C: the README's session-options calls, and the error a missing
 * checkpoint gives (a status with a message, no crash). */
#include <stdio.h>
#include <string.h>

#include "ontrain/c_api.h"

int main(void) {
  OtEnv* env = NULL;
  OtSessionOptions* options = NULL;
  OtCheckpointState* state = NULL;
  OtStatus* st = OtCreateEnv(&env);
  if (st) return 1;
  st = OtCreateSessionOptions(&options);
  if (st) return 1;
  st = OtSessionOptionsAppendProvider(options, "cpu");
  if (st) return 1;
  st = OtLoadCheckpoint("/nonexistent/checkpoint", &state);
  if (!st || strstr(OtStatusMessage(st), "/nonexistent/checkpoint") == NULL) {
    fprintf(stderr, "expected an error naming the path\n");
    return 1;
  }
  OtReleaseStatus(st);
  OtReleaseSessionOptions(options);
  OtReleaseEnv(env);
  puts("c api from another workspace: ok");
  return 0;
}
