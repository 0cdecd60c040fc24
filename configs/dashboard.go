package configs

// Console configures the operator dashboard the router serves on its
// admin listener (GET /dashboard). What it scrapes is listed per SET
// (sets[].admin, sets[].settler_admin); the archiver's last run comes from
// archive.textfile.
type Console struct {
	// VerifyTextfile is the file `hbctl verify --textfile` writes, read
	// for the last verify's result; "" shows none.
	VerifyTextfile string `yaml:"verify_textfile"`
	// AuditEvery runs the money audit (what hbctl verify runs) in the
	// router's process this often, for the dashboard and the
	// hongbao_audit_* metrics; 0, the default, runs it only when an
	// operator asks (the dashboard's "run now", POST /dashboard/audit).
	// It reads every SET in a snapshot: minutes, not seconds.
	AuditEvery Duration `yaml:"audit_every"`
}
