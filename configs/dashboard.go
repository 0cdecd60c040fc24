package configs

// Console configures the operator dashboard the router serves on its
// admin listener (GET /dashboard). What it scrapes is listed per SET
// (sets[].admin, sets[].settler_admin); the archiver's last run comes from
// archive.textfile.
type Console struct {
	// VerifyTextfile is the file `hbctl verify --textfile` writes, read
	// for the last verify's result; "" shows none.
	VerifyTextfile string `yaml:"verify_textfile"`
}
