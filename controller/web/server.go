// Package web is the controller's read-only web view: GPU types with
// their capacity, use and queue; the GPU jobs with what Rota gave them
// and why; fairness and JCT over time; migrations and chains; the agents'
// health; and the estimate form, which shows what `rota estimate` prints.
// Templates and the stylesheet are embedded; plots are SVG drawn on the
// server; the pages carry no script. It reads the controller through
// Source and answers GET, and POST for the estimate form alone (which
// computes and changes nothing); any other method is refused with 405.
package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the view.
type Options struct {
	Auth Auth
	Log  zerolog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Server is the web view's handler.
type Server struct {
	src   Source
	auth  Auth
	log   zerolog.Logger
	now   func() time.Time
	pages map[string]*template.Template
	mux   *http.ServeMux
	// estimates bounds the estimates computed at once: each may read
	// Slurm's queue.
	estimates chan struct{}
}

// maxEstimates is how many estimates run at once; more wait.
const maxEstimates = 2

// maxForm bounds an estimate form's body: a script of jobscript.MaxScript
// and the fields.
const maxForm = 4<<20 + 64<<10

// pageNames are the templates, one per page, each with layout.html.
var pageNames = []string{"overview", "jobs", "job", "trend", "moves", "agents", "estimate", "denied", "error"}

// New makes the view's handler.
func New(src Source, o Options) (*Server, error) {
	if err := o.Auth.check(); err != nil {
		return nil, err
	}
	s := &Server{src: src, auth: o.Auth, log: o.Log, now: o.Now, pages: map[string]*template.Template{},
		estimates: make(chan struct{}, maxEstimates)}
	if s.now == nil {
		s.now = time.Now
	}
	base, err := template.New("layout.html").Funcs(funcs(s.now)).ParseFS(templateFS, "templates/layout.html", "templates/chart.html")
	if err != nil {
		return nil, err
	}
	for _, p := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+p+".html")
		if err != nil {
			return nil, err
		}
		s.pages[p] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /jobs", s.jobs)
	mux.HandleFunc("GET /jobs/{id}", s.protect(s.job))
	mux.HandleFunc("GET /trend", s.trend)
	mux.HandleFunc("GET /moves", s.moves)
	mux.HandleFunc("GET /agents", s.agents)
	mux.HandleFunc("GET /estimate", s.protect(s.estimateForm))
	mux.HandleFunc("POST /estimate", s.protect(s.estimate))
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux = mux
	return s, nil
}

// ServeHTTP sets the security headers, refuses every method but GET and
// POST, and routes (POST reaches the estimate form only: the mux answers
// 405 elsewhere).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script, no frames, nothing from elsewhere; forms post here only.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Pages show the cluster now, and some need authentication.
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		h.Set("Allow", "GET, POST")
		http.Error(w, "method not allowed: this view is read-only", http.StatusMethodNotAllowed)
		return
	}
	start := s.now()
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	s.mux.ServeHTTP(sw, r)
	s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.code).
		Dur("took", s.now().Sub(start)).Str("remote", r.RemoteAddr).Msg("web request")
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// protect serves h to authenticated requests only; others are asked to
// sign in (token) or told how (proxy).
func (s *Server) protect(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.auth.who(r); ok {
			h(w, r)
			return
		}
		code := http.StatusForbidden
		if s.auth.Mode == AuthToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="rota", charset="UTF-8"`)
			code = http.StatusUnauthorized
		}
		s.render(w, r, code, "denied", page{Title: "Sign in", Data: s.auth.Mode})
	}
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	// Authed: the request may see explain details and the estimate
	// form; AuthMode says how one becomes so.
	Authed   bool
	AuthMode string
	Now      time.Time
	Data     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	_, p.Authed = s.auth.who(r)
	p.AuthMode = s.auth.Mode
	p.Now = s.now()
	// Rendered whole before a byte is sent: a template error is a 500,
	// not half a page.
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, "layout.html", p); err != nil {
		s.log.Error().Err(err).Str("page", name).Msg("web page failed to render")
		http.Error(w, "the page failed to render; see the controller's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", page{Title: http.StatusText(code), Data: msg})
}

// readTimeout bounds what a page waits for Slurm and the store.
const readTimeout = 15 * time.Second

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), readTimeout)
}

func jobID(r *http.Request) (uint32, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
	if err != nil || id == 0 {
		return 0, errors.New("not a job id")
	}
	return uint32(id), nil
}
