package multicluster

import (
	"sync"

	"github.com/rs/zerolog"
)

// onceLog logs failures that are retried every tick, about (field, value):
// as a warning the first time (and when the message changes), then at
// debug level, until clear after a success. A route or a peer that fails
// for an hour so logs one warning, not one a tick.
type onceLog struct {
	log zerolog.Logger // the zero Logger logs nothing

	mu   sync.Mutex
	last map[string]string // field=value -> the message last warned
}

func (w *onceLog) warn(field, value string, err error, msg string) {
	key := field + "=" + value
	w.mu.Lock()
	if w.last == nil {
		w.last = map[string]string{}
	}
	seen := w.last[key] == msg
	w.last[key] = msg
	w.mu.Unlock()
	if seen {
		w.log.Debug().Err(err).Str(field, value).Msg(msg)
		return
	}
	w.log.Warn().Err(err).Str(field, value).Msg(msg)
}

func (w *onceLog) clear(field, value string) {
	w.mu.Lock()
	delete(w.last, field+"="+value)
	w.mu.Unlock()
}
