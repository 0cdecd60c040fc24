// Package archive moves a SET's old days out of its live day tables
// (db_xx.t_y_dd) into cold archive tables (db_xx_archive.t_y_yyyymmdd):
// copy, verify by checksum, then purge, under a lock so that a run killed
// anywhere may simply be run again. hbarchive (the nightly cron) drives it.
package archive
