package store

import "context"

// SetSchemaVersion records version v as applied, for the test of a
// database newer than the code.
func SetSchemaVersion(ctx context.Context, s Store, v int) error {
	_, err := s.(*sqlStore).q.exec(ctx, `INSERT INTO schema_version (version, applied_ns) VALUES (?, 0)`, v)
	return err
}
