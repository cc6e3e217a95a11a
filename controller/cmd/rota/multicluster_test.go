package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func TestPrintRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    wire.MCRoute
		want string
	}{
		{wire.MCRoute{ID: "a.1", From: "a", FromJob: 1, To: "b", ToJob: 7, State: "routed", Why: "cannot run here"}, "sent to cluster b as job 7, route a.1 (routed): cannot run here"},
		{wire.MCRoute{ID: "a.2", From: "a", FromJob: 2, To: "b", ToJob: 8, State: "routed", Move: true, Why: "gains 6s"}, "running job moved to cluster b as job 8, route a.2 (routed)"},
		{wire.MCRoute{ID: "a.3", From: "a", FromJob: 3, To: "b", State: "resumed", Move: true, Why: "gains 6s; resumed here as job 9 from its checkpoint"}, "move not taken by cluster b, route a.3 (resumed): gains 6s; resumed here as job 9"},
		{wire.MCRoute{ID: "a.4", From: "a", FromJob: 4, To: "b", ToJob: 3, State: "submitted", Incoming: true, Why: "w"}, "came from cluster a (its job 4) as job 3, route a.4 (submitted): w"},
		{wire.MCRoute{State: "refused_slow", Move: true, Why: "copying 50 GB takes 8m20s"}, "not moved (refused: slow link): copying 50 GB"},
	} {
		var b bytes.Buffer
		printRoute(&b, &tc.r)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v:\n%s\nwant %q", tc.r, b.String(), tc.want)
		}
	}
}
