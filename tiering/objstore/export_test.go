package objstore

// DisableXattr makes s behave as on a filesystem without user xattrs.
func (s *FSStore) DisableXattr() { s.noXattr.Store(true) }
