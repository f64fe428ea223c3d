package client

// InitiateUploadResult is InitiatedUpload by its earlier name (the
// contract's schema was renamed: a generator that names each operation's
// answer <Operation>Result met it as a duplicate).
//
// Deprecated: use InitiatedUpload.
type InitiateUploadResult = InitiatedUpload
