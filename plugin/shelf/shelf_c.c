/* The shelf's C lives in cgo/; go build compiles it from here. */
#include "../../cgo/rota_shelf.c"
