package migrations

// ApplyLock is applyLock, the session advisory lock a running migration
// holds.
const ApplyLock = applyLock

// OlderReplicas is olderReplicas, for a contract migration v that needs
// binaries from oldest on.
var OlderReplicas = olderReplicas
