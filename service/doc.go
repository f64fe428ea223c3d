package service

// Where the parts of docs/behaviour.md are in this package:
//
//	the file and its metadata          File[T], Result
//	the service                        Service, made by New(ctx, Config, DB, ...Option)
//	its configuration                  Config (docs/configuration.md names every option)
//	the trusted request                RequestContext, WithRequestContext
//	the scope                          Scope, DefaultResolveScope
//	the policy and its decisions       AuthorizationPolicy, AuthorizationRequest, Operation, AccessDecision
//	attachments and attached reads     Attachment, Meta, AttachedReadPolicy, AttachedReadRequest
//	upload options                     UploadOptions, TemporaryUploadOptions
//	visibility, status, disposition    Visibility, Status, Disposition, PublicAccessModeExternal, PublicAccessModeObjectACL
//	import from URL                    RemoteCloneConfig
//	batch and reference bounds         BatchLimit, ReferenceMaxLength
//	the configuration in force         Service.EffectiveConfig
//
// Uploads are Upload and UploadTemporary (buffer), UploadLegacy and
// UploadTemporaryLegacy (returning storage references to a host),
// InitiateUpload, InitiateTemporaryUpload, CompleteUpload, AbortUpload and
// PutUploadContent (direct), CreateResumableUpload,
// CreateTemporaryResumableUpload, ResumableState and WriteChunk
// (resumable: chunks that each survive their connection, as the tus
// protocol sends them; AbortUpload ends one too). Reads are Find, FindByID, ResolveURL,
// Download and DownloadAttached; attachment is MarkUsed, UseFiles and
// ChangeFiles; deletion is DeleteByID and Delete. The sweeps' operations
// (CleanupPendingUploads, CleanupExpiredTemporaryFiles and the
// UnsafeSystem* ones, which cross tenants) are for background code and
// operators, never for a request.
//
// Raw storage drivers, key helpers and maintenance providers live under
// internal/ and cannot be imported from outside this module.
