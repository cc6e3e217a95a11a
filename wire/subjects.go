package wire

// Version is the schema version of every message in this package. Bump it
// when a field changes meaning; adding an optional field does not need it.
const Version = 1

// NATS subjects. All of Rota lives under "rota.v1." so a site can grant or
// deny the whole protocol with one wildcard and run two versions side by side.
const (
	// SubjectPlace is request/reply, plugin -> controller: which GPU type
	// and walltime should this submission get? Body PlaceRequest, reply
	// PlaceReply.
	SubjectPlace = "rota.v1.place"

	// SubjectExplain is request/reply, CLI -> controller: why did a job get
	// what it got? Body ExplainRequest, reply ExplainReply.
	SubjectExplain = "rota.v1.explain"

	// SubjectStatus is request/reply, CLI -> controller: the controller's
	// view of the cluster. Body StatusRequest, reply StatusReply.
	SubjectStatus = "rota.v1.status"

	// SubjectEstimate is request/reply, CLI -> controller: what would a
	// job need on each partition and GPU type, when would it finish and
	// at what cost? Body EstimateRequest, reply EstimateReply.
	SubjectEstimate = "rota.v1.estimate"
)

// Admin subjects: everything that changes the controller's behaviour
// (policy changes, migrations) goes under "rota.v1.admin.", which only the
// admin credential may publish to; the read-only CLI credential may not.
// Nothing answers on them yet; the prefix is reserved so permissions can
// be granted today.
const (
	// SubjectAdminPrefix starts every admin subject.
	SubjectAdminPrefix = "rota.v1.admin."
	// SubjectAdminAll matches every admin subject.
	SubjectAdminAll = "rota.v1.admin.>"
)
