//go:build !rota_split

/* The C half of the plugin lives in cgo/; go build compiles it from here. */
#include "../../cgo/job_submit_rota.c"
