package schema

import (
	"fmt"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
)

// ArchiveTable names the cold-storage tables of one bucket and one full
// date: db_xx_archive.t_y_yyyymmdd and its _detail. Unlike the day tables
// they are never reused, so the full date is in the name.
type ArchiveTable struct {
	Bucket hongbao.Bucket
	Date   string // yyyymmdd
}

// DB is the archive database of the bucket.
func (a ArchiveTable) DB() string { return a.Bucket.DB() + "_archive" }

// Packets is the qualified archive packet table.
func (a ArchiveTable) Packets() string {
	return fmt.Sprintf("%s.t_%d_%s", a.DB(), int(a.Bucket)%10, a.Date)
}

// Details is the qualified archive detail table.
func (a ArchiveTable) Details() string { return a.Packets() + "_detail" }

// ArchiveStatements creates the archive tables of a: the live DDL with a
// compressed row format, since cold rows are read rarely and kept long.
func ArchiveStatements(a ArchiveTable) []string {
	compressed := func(ddl string) string {
		return strings.Replace(ddl, "ENGINE=InnoDB", "ENGINE=InnoDB ROW_FORMAT=COMPRESSED", 1)
	}
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + a.DB(),
		compressed(fmt.Sprintf(packetsDDL, a.Packets())),
		compressed(fmt.Sprintf(detailsDDL, a.Details())),
		fmt.Sprintf(audienceDDL, a.DB()),
	}
}
