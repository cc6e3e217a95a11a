package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/slurmtime"
)

// Restd reads and changes Slurm through slurmrestd, Slurm's REST API,
// instead of squeue/sinfo/scontrol processes: one HTTP request per read
// or update, no process start-up, and the job list as JSON.
//
// It authenticates with a JWT (slurm.conf AuthAltTypes=auth/jwt), sent as
// X-SLURM-USER-TOKEN with the user in X-SLURM-USER-NAME. The API version
// (v0.0.37 to v0.0.44) is negotiated once, at the first call, from the
// OpenAPI description slurmrestd serves, as Slurm's own clients do: the
// newest version both sides know.
//
// What the negotiated version cannot express goes through the embedded
// CLI, which also serves everything slurmrestd is not used for (accounting,
// limits, node sizes, submissions): Requeue (no REST endpoint), handing a
// priority back (ResetPriority: `scontrol release`; v0.0.38's "hold":
// false sets priority 0, verified on 22.05.8), and on v0.0.37/v0.0.38 an
// update's ExcNodes and GPU request (not in those versions' job
// properties). Each such fallback is logged once.
type Restd struct {
	// CLI serves what slurmrestd does not (see above). Its Env and
	// Timeout apply to those commands.
	*CLI
	// URL is slurmrestd's address: http://host:port, https://..., or
	// unix:/path/to/socket.
	URL string
	// User is X-SLURM-USER-NAME: the user the token is for. It must be
	// allowed to change others' jobs (root, SlurmUser, or an admin in
	// accounting), as for scontrol.
	User string
	// Token gives the JWT for each request.
	Token TokenSource
	// Version, when set, skips the negotiation and uses this API version
	// (e.g. "v0.0.38"); it must be one this code supports.
	Version string
	// Timeout bounds each request (default 30 s: the job list of a large
	// queue is megabytes).
	Timeout time.Duration
	// Log receives the negotiation and fallback notes.
	Log zerolog.Logger
	// QueueBySqueue reads the whole queue (Jobs, DecisionIDs) with
	// squeue instead: slurmrestd 22.05 takes seconds to write the JSON of
	// thousands of jobs that squeue prints in a fraction of that
	// (docs/rounds.md has the figures), while one job, the cluster reads
	// and every update still go through slurmrestd.
	QueueBySqueue bool
	// FullReadEvery: the job list is read whole at least this often
	// (default 1 min); between, only when slurmctld says it changed
	// (v0.0.37/v0.0.38, see Jobs).
	FullReadEvery time.Duration

	mu       sync.Mutex
	client   *http.Client
	base     string // URL without a unix: scheme: http://unix
	api      string // negotiated version, "" until then
	fellBack sync.Map
	requests atomic.Int64

	// The last job list (Jobs): its records, when it was asked for, and
	// when the last whole one was.
	jobsMu             sync.Mutex
	jobsCache          []restJob
	jobsSent, jobsFull time.Time
	jobsSince          time.Time
	unchanged          atomic.Int64
}

// SupportedAPIVersions are the slurmrestd API versions Restd reads and
// writes, oldest first. v0.0.37 and v0.0.38 (Slurm 22.05, 23.02) have
// flat job, node and partition records with plain numbers; from v0.0.39
// numbers may be {"set","infinite","number"} objects, states arrays and
// partitions nested (Slurm 23.02 to 26.05 serve v0.0.39 to v0.0.44). The
// parsers accept both shapes for every version.
var SupportedAPIVersions = []string{"v0.0.37", "v0.0.38", "v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"}

// legacyAPI says whether version v has the flat v0.0.37/v0.0.38 job
// properties for updates.
func legacyAPI(v string) bool { return v == "v0.0.37" || v == "v0.0.38" }

// Requests is how many HTTP requests this client has made (benchmarks).
func (r *Restd) Requests() int64 { return r.requests.Load() }

// APIVersion negotiates (once) and returns the API version in use.
func (r *Restd) APIVersion(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.api != "" {
		return r.api, nil
	}
	if err := r.setupLocked(); err != nil {
		return "", err
	}
	if r.Version != "" {
		if !supported(r.Version) {
			return "", fmt.Errorf("slurmrestd_version = %s: this controller supports %s", r.Version, strings.Join(SupportedAPIVersions, ", "))
		}
		r.api = r.Version
		return r.api, nil
	}
	served, err := r.servedVersions(ctx)
	if err != nil {
		return "", err
	}
	v, err := PickAPIVersion(served)
	if err != nil {
		return "", fmt.Errorf("slurmrestd at %s: %w", r.URL, err)
	}
	r.api = v
	r.Log.Info().Str("url", r.URL).Str("api", v).Strs("served", served).
		Msg("slurmrestd: using the newest Slurm REST API version both it and this controller know")
	return v, nil
}

func supported(v string) bool {
	for _, s := range SupportedAPIVersions {
		if s == v {
			return true
		}
	}
	return false
}

// setupLocked makes the HTTP client for URL.
func (r *Restd) setupLocked() error {
	if r.client != nil {
		return nil
	}
	if r.Token == nil {
		return errors.New("slurmrestd: no token source (set slurmrestd_jwt_key or slurmrestd_token_file)")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
	switch {
	case strings.HasPrefix(r.URL, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(r.URL, "unix:"), "//")
		if path == "" {
			return fmt.Errorf("slurmrestd_url = %q: want unix:/path/to/socket", r.URL)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		r.base = "http://slurmrestd"
	case strings.HasPrefix(r.URL, "http://"), strings.HasPrefix(r.URL, "https://"):
		r.base = strings.TrimRight(r.URL, "/")
	default:
		return fmt.Errorf("slurmrestd_url = %q: want http://host:port, https://host:port or unix:/path", r.URL)
	}
	r.client = &http.Client{Transport: tr}
	return nil
}

func (r *Restd) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 30 * time.Second
}

// restError is what slurmrestd answered when it refused a request.
type restError struct {
	Status int
	Method string
	Path   string
	Errors []string
	// Codes are the Slurm error numbers (2017: invalid job id).
	Codes []int
}

func (e *restError) Error() string {
	msg := strings.Join(e.Errors, "; ")
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("slurmrestd %s %s: HTTP %d: %s", e.Method, e.Path, e.Status, msg)
}

// unspecified: a failure with no Slurm error number (-1 only), which is
// how 22.05's slurmrestd reports slurmctld refusing the token.
func (e *restError) unspecified() bool {
	if e.Status < 500 || len(e.Codes) == 0 {
		return false
	}
	for _, c := range e.Codes {
		if c != -1 {
			return false
		}
	}
	return true
}

func (e *restError) has(code int) bool {
	for _, c := range e.Codes {
		if c == code {
			return true
		}
	}
	return false
}

// esInvalidJobID is Slurm's ESLURM_INVALID_JOB_ID.
const esInvalidJobID = 2017

// do sends one request and returns the body of a successful answer. A
// body's "errors" list makes it an error even under HTTP 200 (22.05
// answers a refused update that way).
func (r *Restd) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	r.mu.Lock()
	err := r.setupLocked()
	client, base := r.client, r.base
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	tok, err := r.Token.Token(r.User)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd: cannot make a token: %w", err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-SLURM-USER-NAME", r.User)
	req.Header.Set("X-SLURM-USER-TOKEN", tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	r.requests.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("slurmrestd %s %s: reading the answer: %w", method, path, err)
	}
	if rerr := answerErrors(resp.StatusCode, out); rerr != nil {
		rerr.Method, rerr.Path = method, path
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || rerr.unspecified() {
			rerr.Errors = append(rerr.Errors, "authentication refused, or slurmctld failed the request (slurmctld's log says which): check the JWT key (AuthAltParameters=jwt_key in slurm.conf), slurmrestd_user, and that slurmctld runs")
		}
		return nil, rerr
	}
	return out, nil
}

// answerErrors reads the errors of an answer; nil when it succeeded.
func answerErrors(status int, body []byte) *restError {
	var env struct {
		Errors []struct {
			Error       string          `json:"error"`
			Description string          `json:"description"`
			Number      json.RawMessage `json:"error_number"`
			Code        json.RawMessage `json:"error_code"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(body, &env)
	e := &restError{Status: status}
	for _, x := range env.Errors {
		msg := x.Error
		if x.Description != "" {
			msg = strings.TrimSpace(x.Description + ": " + x.Error)
		}
		e.Errors = append(e.Errors, msg)
		for _, raw := range []json.RawMessage{x.Number, x.Code} {
			if n, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				e.Codes = append(e.Codes, n)
			}
		}
	}
	if (status >= 200 && status < 300 && len(e.Errors) == 0) || status == http.StatusNotModified {
		return nil
	}
	if len(e.Errors) == 0 && status >= 300 {
		s := strings.TrimSpace(string(body))
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		if s != "" {
			e.Errors = append(e.Errors, s)
		}
	}
	return e
}

// servedVersions reads the API versions slurmrestd serves from its
// OpenAPI description (/openapi/v3, else /openapi), else by asking each
// supported version's ping.
func (r *Restd) servedVersions(ctx context.Context) ([]string, error) {
	var firstErr error
	for _, p := range []string{"/openapi/v3", "/openapi"} {
		body, err := r.doLocked(ctx, p)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		vs, err := ServedAPIVersions(body)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("slurmrestd %s: %w", p, err)
			}
			continue
		}
		return vs, nil
	}
	var vs []string
	for _, v := range SupportedAPIVersions {
		if _, err := r.doLocked(ctx, "/slurm/"+v+"/ping"); err == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		return vs, nil
	}
	return nil, fmt.Errorf("cannot read slurmrestd's API versions at %s: %w", r.URL, firstErr)
}

// doLocked is do for the negotiation, which holds r.mu.
func (r *Restd) doLocked(ctx context.Context, path string) ([]byte, error) {
	r.mu.Unlock()
	defer r.mu.Lock()
	return r.do(ctx, http.MethodGet, path, nil)
}

var apiPathRe = regexp.MustCompile(`^/slurm/(v\d+\.\d+\.\d+)/jobs/?$`)

// ServedAPIVersions lists the Slurm (not slurmdbd) API versions with a
// job list in an OpenAPI description, oldest first.
func ServedAPIVersions(openapi []byte) ([]string, error) {
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi, &doc); err != nil {
		return nil, fmt.Errorf("not an OpenAPI description: %w", err)
	}
	if len(doc.Paths) == 0 {
		return nil, errors.New("the OpenAPI description lists no paths")
	}
	seen := map[string]bool{}
	var vs []string
	for p := range doc.Paths {
		if m := apiPathRe.FindStringSubmatch(p); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			vs = append(vs, m[1])
		}
	}
	sort.Slice(vs, func(i, j int) bool { return versionLess(vs[i], vs[j]) })
	return vs, nil
}

// ErrNoCommonAPIVersion: slurmrestd serves no API version this code
// supports (a lasting condition, unlike slurmrestd being down).
var ErrNoCommonAPIVersion = errors.New("no Slurm REST API version in common")

// PickAPIVersion is the newest of served that this code supports.
func PickAPIVersion(served []string) (string, error) {
	best := ""
	for _, v := range served {
		if supported(v) && (best == "" || versionLess(best, v)) {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: it serves Slurm API versions [%s], none of which this controller supports (%s): "+
			"load a supported openapi plugin in slurmrestd (-s), or upgrade Rota", ErrNoCommonAPIVersion, strings.Join(served, " "), strings.Join(SupportedAPIVersions, ", "))
	}
	return best, nil
}

// versionLess orders "v0.0.38" < "v0.0.40" numerically.
func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return a < b
}

func versionParts(v string) [3]int {
	var out [3]int
	for i, p := range strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3) {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}

// get reads path under the negotiated version.
func (r *Restd) get(ctx context.Context, path string) ([]byte, error) {
	v, err := r.APIVersion(ctx)
	if err != nil {
		return nil, err
	}
	return r.do(ctx, http.MethodGet, "/slurm/"+v+path, nil)
}

// Nodes implements Client.
func (r *Restd) Nodes(ctx context.Context) ([]Node, error) {
	body, err := r.get(ctx, "/nodes")
	if err != nil {
		return nil, err
	}
	nodes, err := ParseRestdNodes(body)
	if err != nil {
		return nil, err
	}
	// Reservations through scontrol (one process a refresh): their JSON
	// records change shape between API versions, the one-line form has
	// not.
	reserved, err := r.CLI.reservedNodes(ctx)
	if err != nil {
		// The nodes slurmrestd gave still hold; placement then may pick
		// a type whose nodes are reserved, where a job waits (as before).
		if _, told := r.fellBack.LoadOrStore("reservations-failed", true); !told {
			r.Log.Warn().Err(err).Msg("cannot read Slurm's reservations; placing as if there were none (reserved nodes count as free) until it works")
		}
		return nodes, nil
	}
	r.fellBack.Delete("reservations-failed")
	return MarkReserved(nodes, reserved), nil
}

// Partitions implements Client. From v0.0.39 a partition record has no
// flags, so not the default one (verified on 26.05.5's v0.0.44): Rota then
// takes the default's name from `scontrol show partition`.
func (r *Restd) Partitions(ctx context.Context) ([]Partition, error) {
	body, err := r.get(ctx, "/partitions")
	if err != nil {
		return nil, err
	}
	parts, err := ParseRestdPartitions(body)
	if err != nil || !restdPartitionsLackDefault(body) {
		return parts, err
	}
	r.fallback("default-partition", r.api, "which partition is the default (not in this version's partition records)")
	cli, err := r.CLI.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("the default partition (scontrol show partition): %w", err)
	}
	for _, c := range cli {
		for i := range parts {
			if parts[i].Name == c.Name {
				parts[i].Default = c.Default
			}
		}
	}
	return parts, nil
}

// restdPartitionsLackDefault: the answer's partitions carry no flags
// (v0.0.39 and later), so none can say it is the default.
func restdPartitionsLackDefault(body []byte) bool {
	var env struct {
		Partitions []map[string]json.RawMessage `json:"partitions"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Partitions) == 0 {
		return false
	}
	for _, p := range env.Partitions {
		if _, ok := p["flags"]; ok {
			return false
		}
	}
	return true
}

// Jobs implements Scheduler: every job slurmctld holds in one request,
// kept when pending or running. AdminComment comes with each job, so
// DecisionRead is always true.
//
// A read asks only for changes since the previous one (update_time):
// slurmctld then answers "no change" without packing the queue, and the
// last list is served again, its run times brought up to now. 22.05's
// slurmrestd says so with HTTP 304 and no body (0.09 s instead of 1.7 s
// for 2,000 jobs), 26.05's (v0.0.44) with no jobs and last_update unset.
// update_time is slurmctld's own last_update from the previous answer
// where it has one (v0.0.39 on), else that request's send time less a
// second, so a change while slurmctld packed it is read again. A full read
// every FullReadEvery (default 1 min) bounds how long a change slurmctld
// does not count as one (a recalculated priority) may lag. A reader with
// QueueSince takes the last list when its request fits.
func (r *Restd) Jobs(ctx context.Context) ([]Job, error) {
	jobs, _, err := r.JobsAt(ctx)
	return jobs, err
}

// JobsAt implements JobsAter: Jobs, with when slurmctld was asked.
func (r *Restd) JobsAt(ctx context.Context) ([]Job, time.Time, error) {
	if r.QueueBySqueue {
		return r.CLI.JobsAt(ctx)
	}
	v, err := r.APIVersion(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	r.jobsMu.Lock()
	defer r.jobsMu.Unlock()
	if q, ok := queueSinceOf(ctx); ok && r.jobsCache != nil && q.takes(r.jobsSent) {
		jobs, err := restdJobs(r.jobsCache, time.Now())
		return jobs, r.jobsSent, err
	}
	path := "/slurm/" + v + "/jobs"
	if !legacyAPI(v) {
		path += "/" // as v0.0.39 and later list it
	}
	incremental := r.jobsCache != nil && time.Since(r.jobsFull) < r.fullReadEvery()
	if incremental {
		since := r.jobsSince
		if since.IsZero() {
			since = r.jobsSent.Add(-time.Second)
		}
		path += "?update_time=" + strconv.FormatInt(since.Unix(), 10)
	}
	sent := time.Now()
	body, err := r.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if !incremental {
			return nil, time.Time{}, fmt.Errorf("slurmrestd GET %s: an empty answer", path)
		}
		r.unchanged.Add(1)
		r.jobsSent = sent
		jobs, err := restdJobs(r.jobsCache, time.Now())
		return jobs, sent, err
	}
	var env struct {
		Jobs       []restJob `json:"jobs"`
		LastUpdate *restNum  `json:"last_update"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, time.Time{}, fmt.Errorf("slurmrestd job list: %w", err)
	}
	// v0.0.39 and later answer "no change" with HTTP 200, no jobs and
	// last_update unset (verified on 26.05.5, v0.0.44); a real answer,
	// even of an empty queue, carries slurmctld's last_update.
	if incremental && len(env.Jobs) == 0 && env.LastUpdate != nil && (!env.LastUpdate.Set || env.LastUpdate.N == 0) {
		r.unchanged.Add(1)
		r.jobsSent = sent
		jobs, err := restdJobs(r.jobsCache, time.Now())
		return jobs, sent, err
	}
	jobs, err := restdJobs(env.Jobs, time.Now())
	if err != nil {
		return nil, time.Time{}, err
	}
	r.jobsCache, r.jobsSent = env.Jobs, sent
	// slurmctld's own time of its last change, where the answer has it:
	// the next read asks for changes since then, whatever the clocks.
	r.jobsSince = time.Time{}
	if env.LastUpdate != nil && env.LastUpdate.Set && env.LastUpdate.N > 0 {
		// Less a second: slurmctld counts a change in the same second as
		// unchanged.
		r.jobsSince = time.Unix(env.LastUpdate.N-1, 0)
	}
	if !incremental {
		r.jobsFull = sent
	}
	return jobs, sent, nil
}

// fullReadEvery is FullReadEvery, or a minute.
func (r *Restd) fullReadEvery() time.Duration {
	if r.FullReadEvery > 0 {
		return r.FullReadEvery
	}
	return time.Minute
}

// Unchanged is how many job list reads slurmctld answered "no change".
func (r *Restd) Unchanged() int64 { return r.unchanged.Load() }

// Job implements Scheduler.
func (r *Restd) Job(ctx context.Context, id uint32) (Job, bool, error) {
	body, err := r.get(ctx, "/job/"+strconv.FormatUint(uint64(id), 10))
	if err != nil {
		var re *restError
		if errors.As(err, &re) && re.has(esInvalidJobID) {
			return Job{}, false, nil
		}
		return Job{}, false, err
	}
	jobs, err := ParseRestdJobs(body, time.Now())
	if err != nil {
		return Job{}, false, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return Job{}, false, nil
}

// JobAdminComment implements Client.
func (r *Restd) JobAdminComment(ctx context.Context, jobID uint32) (string, error) {
	body, err := r.get(ctx, "/job/"+strconv.FormatUint(uint64(jobID), 10))
	if err != nil {
		return "", err
	}
	recs, err := decodeJobs(body)
	if err != nil {
		return "", err
	}
	for _, j := range recs {
		if j.JobID.Set && j.JobID.N == int64(jobID) {
			return j.AdminComment, nil
		}
	}
	return "", fmt.Errorf("slurmrestd: job %d not in its own answer", jobID)
}

// DecisionIDs implements Scheduler. Jobs always carries the AdminComment,
// so the round loop never needs it; it reads the queue once more.
func (r *Restd) DecisionIDs(ctx context.Context) (map[uint32]string, error) {
	jobs, err := r.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[uint32]string{}
	for _, j := range jobs {
		if j.Decision != "" {
			ids[j.ID] = j.Decision
		}
	}
	return ids, nil
}

// Update implements Scheduler: one POST with what the API version
// carries, then scontrol for the rest (see Restd).
func (r *Restd) Update(ctx context.Context, jobID uint32, u JobUpdate) error {
	v, err := r.APIVersion(ctx)
	if err != nil {
		return err
	}
	body, rest := RestdUpdateBody(v, u, time.Now())
	if len(body) > 0 {
		if _, err := r.do(ctx, http.MethodPost, "/slurm/"+v+"/job/"+strconv.FormatUint(uint64(jobID), 10), body); err != nil {
			return err
		}
	}
	if rest.ExcNodes != nil || rest.GPU != nil || rest.StartNow || rest.AdminComment != nil {
		r.fallback("update", v, "ExcNodeList or the GPU request (TresPer*) of a pending job")
	}
	if rest.ResetPriority {
		r.fallback("release", v, "handing a priority back to Slurm (scontrol release)")
	}
	if rest.args() == nil && !rest.ResetPriority {
		return nil
	}
	return r.CLI.Update(ctx, jobID, rest)
}

// UpdatePaced implements PacedUpdater, so that the CLI's, which Restd
// embeds, is not the one a round uses: slurmrestd takes one job per
// request, each as cheap as an update gets (no process per job).
func (r *Restd) UpdatePaced(ctx context.Context, changes []Change, gap func() bool) []error {
	return UpdateOneByOne(ctx, r.Update, changes, gap)
}

// Requeue implements Scheduler through scontrol: no slurmrestd version
// this code supports has a requeue request.
func (r *Restd) Requeue(ctx context.Context, jobID uint32) error {
	r.fallback("requeue", "", "requeue")
	return r.CLI.Requeue(ctx, jobID)
}

// fallback logs once per kind that a call goes through scontrol.
func (r *Restd) fallback(kind, version, what string) {
	if _, done := r.fellBack.LoadOrStore(kind, true); done {
		return
	}
	ev := r.Log.Info().Str("what", what)
	if version != "" {
		ev = ev.Str("api", version)
	}
	ev.Msg("slurmrestd cannot do this in its API version; Rota runs scontrol for it (the controller host needs Slurm's client commands)")
}

// RestdUpdateBody splits u into the JSON job properties of API version v
// and the part only scontrol can apply (rest; its zero value when
// nothing is left). now is StartNow's begin time.
func RestdUpdateBody(v string, u JobUpdate, now time.Time) (map[string]any, JobUpdate) {
	body := map[string]any{}
	var rest JobUpdate
	legacy := legacyAPI(v)
	if u.Features != nil {
		body["constraints"] = *u.Features
	}
	if u.Nice != nil {
		body["nice"] = *u.Nice
	}
	if u.Priority != nil {
		if legacy {
			body["priority"] = *u.Priority
		} else {
			body["priority"] = map[string]any{"set": true, "number": *u.Priority}
		}
	}
	if u.TimeLimitMin != nil {
		switch {
		case legacy && *u.TimeLimitMin == slurmtime.Unlimited:
			body["time_limit"] = "UNLIMITED"
		case legacy:
			body["time_limit"] = *u.TimeLimitMin
		case *u.TimeLimitMin == slurmtime.Unlimited:
			body["time_limit"] = map[string]any{"set": true, "infinite": true}
		default:
			body["time_limit"] = map[string]any{"set": true, "number": *u.TimeLimitMin}
		}
	}
	if legacy {
		// v0.0.37/38 have neither the excluded nodes nor the tres_per_*
		// of a job; a begin time must not free a job before its excluded
		// nodes are set, so it goes with them.
		rest.ExcNodes, rest.GPU = u.ExcNodes, u.GPU
		if u.StartNow && u.ExcNodes != nil {
			rest.StartNow = true
		} else if u.StartNow {
			// Parsed by sbatch's option parser: "now", as scontrol's.
			body["begin_time"] = "now"
		}
	} else {
		if u.ExcNodes != nil {
			names, err := ExpandHostlist(*u.ExcNodes)
			if err != nil {
				names = splitList(*u.ExcNodes)
			}
			if names == nil {
				names = []string{}
			}
			body["excluded_nodes"] = names
		}
		if g := u.GPU; g != nil {
			for _, f := range []struct{ name, v string }{{"tres_per_job", g.PerJob}, {"tres_per_node", g.PerNode},
				{"tres_per_socket", g.PerSocket}, {"tres_per_task", g.PerTask}} {
				if f.v != "" {
					body[f.name] = f.v
				}
			}
		}
		if u.StartNow {
			body["begin_time"] = map[string]any{"set": true, "number": now.Unix()}
		}
	}
	rest.ResetPriority = u.ResetPriority
	// Through scontrol in every version: a rare write (a job the plugin
	// let through), and admin_comment's place in the JSON moved between
	// versions.
	rest.AdminComment = u.AdminComment
	return body, rest
}

func splitList(s string) []string {
	out := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
