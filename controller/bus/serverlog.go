package bus

import (
	"fmt"

	"github.com/rs/zerolog"
)

// serverLog hands the embedded NATS server's warnings and errors to the
// controller's log (its notices, debug and trace stay out: the log is
// quiet by default). Without it a server that fails to start, a port
// taken between the check and its listen say, left only "did not start".
type serverLog struct{ log zerolog.Logger }

func (l serverLog) Noticef(string, ...any) {}
func (l serverLog) Debugf(string, ...any)  {}
func (l serverLog) Tracef(string, ...any)  {}

func (l serverLog) Warnf(format string, v ...any) {
	l.log.Warn().Msg("embedded NATS server: " + fmt.Sprintf(format, v...))
}

func (l serverLog) Errorf(format string, v ...any) {
	l.log.Error().Msg("embedded NATS server: " + fmt.Sprintf(format, v...))
}

// Fatalf is an error here: nats-server returns after it (a listener that
// failed), and the controller, not the library, decides to stop.
func (l serverLog) Fatalf(format string, v ...any) {
	l.log.Error().Msg("embedded NATS server: " + fmt.Sprintf(format, v...))
}
