// Package limits is the site's typed GPU limits as Rota must respect them:
// the limits accounting sets on gres/gpu:<type> for QOS and associations,
// what the running and placed jobs already hold of them, and so how many
// more GPUs of each type a user's next job may take. Slurm enforces a
// limit on a typed GPU only for jobs whose GPU request names that type
// (resource_limits.html); Rota writes the type into the request, and this
// package keeps it from choosing a type whose limit would hold the job
// pending while another type would run it (docs/rounds.md, "Typed limits").
//
// The package is pure: controller/slurm reads the limits (sacctmgr) and
// the jobs (squeue); the round loop and the placement state use Room.
package limits

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// PerType is GPUs per GPU type: a limit's value, or what jobs hold.
type PerType map[string]int

// QOS holds one QOS's limits on typed GPUs.
type QOS struct {
	Name       string
	PerUser    PerType // MaxTRESPerUser
	PerAccount PerType // MaxTRESPerAccount
	Group      PerType // GrpTRES: every job of the QOS together
	PerJob     PerType // MaxTRES
}

// Assoc is one association: an account's (User "") or a user's in an
// account, with its limits on typed GPUs.
type Assoc struct {
	Account, User string
	// Parent is the parent account of an account's association.
	Parent string
	// DefaultQOS is the QOS of a job that names none ("" unknown: Slurm's
	// default, "normal").
	DefaultQOS string
	Group      PerType // GrpTRES: the association's jobs together (an account's: its whole subtree)
	PerJob     PerType // MaxTRES
}

// Set is a cluster's limits.
type Set struct {
	QOS    map[string]QOS
	Assocs []Assoc
	// DefaultAccount is each user's default account.
	DefaultAccount map[string]string
}

// Typed says whether any limit names a GPU type: without one, typing a
// request changes nothing for limits.
func (s *Set) Typed() bool {
	if s == nil {
		return false
	}
	for _, q := range s.QOS {
		if len(q.PerUser)+len(q.PerAccount)+len(q.Group)+len(q.PerJob) > 0 {
			return true
		}
	}
	for _, a := range s.Assocs {
		if len(a.Group)+len(a.PerJob) > 0 {
			return true
		}
	}
	return false
}

// Use is GPUs of one type that a job holds or will hold: a running job,
// or a pending job whose type is chosen and that no limit holds back.
type Use struct {
	User, Account, QOS, Type string
	GPUs                     int
}

// Usage sums uses by every scope a limit can have.
type Usage struct {
	qosUser, qosAccount map[string]PerType // "qos/user", "qos/account"
	qos                 map[string]PerType
	assoc               map[string]PerType // "account/user" and "account/" (the account's subtree)
	s                   *Set
}

// NewUsage counts uses against s's scopes.
func (s *Set) NewUsage(uses []Use) *Usage {
	u := &Usage{qosUser: map[string]PerType{}, qosAccount: map[string]PerType{}, qos: map[string]PerType{},
		assoc: map[string]PerType{}, s: s}
	for _, x := range uses {
		u.Add(x)
	}
	return u
}

func add(m map[string]PerType, k, t string, n int) {
	if m[k] == nil {
		m[k] = PerType{}
	}
	m[k][t] += n
}

// Add counts one more use.
func (u *Usage) Add(x Use) {
	if x.Type == "" || x.GPUs <= 0 {
		return
	}
	add(u.qosUser, x.QOS+"/"+x.User, x.Type, x.GPUs)
	add(u.qosAccount, x.QOS+"/"+x.Account, x.Type, x.GPUs)
	add(u.qos, x.QOS, x.Type, x.GPUs)
	add(u.assoc, x.Account+"/"+x.User, x.Type, x.GPUs)
	for _, a := range u.s.ancestors(x.Account) {
		add(u.assoc, a+"/", x.Type, x.GPUs)
	}
}

// ancestors is the account and its parents up to the root.
func (s *Set) ancestors(account string) []string {
	var out []string
	for a, seen := account, 0; a != "" && seen < 64; seen++ {
		out = append(out, a)
		p := ""
		for i := range s.Assocs {
			if s.Assocs[i].User == "" && s.Assocs[i].Account == a {
				p = s.Assocs[i].Parent
				break
			}
		}
		if p == a {
			break
		}
		a = p
	}
	return out
}

func (s *Set) assoc(account, user string) *Assoc {
	for i := range s.Assocs {
		if s.Assocs[i].Account == account && s.Assocs[i].User == user {
			return &s.Assocs[i]
		}
	}
	return nil
}

// Resolve fills in what a request left to defaults: the user's default
// account and that association's default QOS ("normal" when it names none).
func (s *Set) Resolve(user, account, qos string) (string, string) {
	if account == "" {
		account = s.DefaultAccount[user]
	}
	if qos == "" {
		// The user's association's, else the nearest account's up the tree.
		qos = "normal"
		if a := s.assoc(account, user); a != nil && a.DefaultQOS != "" {
			return account, a.DefaultQOS
		}
		for _, acct := range s.ancestors(account) {
			if a := s.assoc(acct, ""); a != nil && a.DefaultQOS != "" {
				return account, a.DefaultQOS
			}
		}
	}
	return account, qos
}

// Room is how many more GPUs of type t a job of user with account and qos
// (resolved: see Resolve) may hold under every limit: the least left of
// any limit on gres/gpu:t, and the limit that leaves it, in words for the
// explanation. ok is false when no limit names t for this job.
func (u *Usage) Room(user, account, qos, t string) (left int, why string, ok bool) {
	s := u.s
	left = int(^uint(0) >> 1)
	try := func(limit PerType, used PerType, what string, perJob bool) {
		n, has := limit[t]
		if !has {
			return
		}
		l := n
		if !perJob {
			l = n - used[t]
		}
		if !ok || l < left {
			left, ok = l, true
			why = fmt.Sprintf("%s gres/gpu:%s=%d", what, t, n)
		}
	}
	if q, found := s.QOS[qos]; found {
		try(q.PerUser, u.qosUser[qos+"/"+user], "QOS "+qos+" MaxTRESPerUser", false)
		try(q.PerAccount, u.qosAccount[qos+"/"+account], "QOS "+qos+" MaxTRESPerAccount", false)
		try(q.Group, u.qos[qos], "QOS "+qos+" GrpTRES", false)
		try(q.PerJob, nil, "QOS "+qos+" MaxTRES", true)
	}
	if a := s.assoc(account, user); a != nil {
		try(a.Group, u.assoc[account+"/"+user], "user "+user+" in account "+account+" GrpTRES", false)
		try(a.PerJob, nil, "user "+user+" in account "+account+" MaxTRES", true)
	}
	for _, acct := range s.ancestors(account) {
		if a := s.assoc(acct, ""); a != nil {
			try(a.Group, u.assoc[acct+"/"], "account "+acct+" GrpTRES", false)
			try(a.PerJob, nil, "account "+acct+" MaxTRES", true)
		}
	}
	if !ok {
		return 0, "", false
	}
	return max(left, 0), why, true
}

// ParseTRES reads the typed GPU entries of a TRES limit as sacctmgr
// prints it ("cpu=4,gres/gpu:v100=2,gres/gpu=8"): {v100: 2}. Untyped and
// other TRES are not Rota's to weigh (they hold whichever type it picks).
func ParseTRES(s string) (PerType, error) {
	var out PerType
	for _, e := range strings.Split(strings.TrimSpace(s), ",") {
		if e == "" {
			continue
		}
		name, val, found := strings.Cut(e, "=")
		if !found {
			return nil, fmt.Errorf("TRES %q: no '='", e)
		}
		t, typed := strings.CutPrefix(name, "gres/gpu:")
		if !typed {
			continue
		}
		if t == "" || strings.ContainsAny(t, ":/ ") {
			return nil, fmt.Errorf("TRES %q: bad GPU type", e)
		}
		n, err := strconv.ParseInt(val, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("TRES %q: bad count", e)
		}
		if out == nil {
			out = PerType{}
		}
		out[t] = int(n)
	}
	return out, nil
}

// Users lists the users of the set's associations, sorted.
func (s *Set) Users() []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range s.Assocs {
		if a.User != "" && !seen[a.User] {
			seen[a.User] = true
			out = append(out, a.User)
		}
	}
	sort.Strings(out)
	return out
}

// Keys lists the (account, QOS) pairs a user may submit with, as
// "account/qos", plus "account/" for a request naming no QOS and the same
// for the default account under "/qos" and "/": what a placement state
// carries per user (wire.UserHeadroom).
func (s *Set) Keys(user string) []string {
	var out []string
	for _, a := range s.Assocs {
		if a.User != user {
			continue
		}
		out = append(out, a.Account+"/")
		for name := range s.QOS {
			out = append(out, a.Account+"/"+name)
		}
	}
	sort.Strings(out)
	return out
}
