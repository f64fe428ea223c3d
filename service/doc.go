package service

// How the spec's exports map onto this package:
//
//	UploadedFile<TExtraData>            File[T]
//	UploadedFileService                 Service (New)
//	UploadedFileModule.forRoot(config)  New(ctx, Config, DB, ...Option)
//	UploadedFileController              internal/adapter/httpapi (the HTTP server)
//	UploadedFileConfig                  Config
//	UploadedFileContext                 RequestContext (WithRequestContext)
//	UploadedFileOperation               Operation
//	UploadedFileAccessDecision          AccessDecision
//	UploadedFileScope                   Scope (DefaultResolveScope)
//	UploadedFileAuthorizationRequest    AuthorizationRequest
//	UploadedFileAuthorizationPolicy     AuthorizationPolicy
//	UploadedFileAttachment              Attachment
//	UploadedFileAttachedReadRequest     AttachedReadRequest
//	UploadedFileAttachedReadPolicy      AttachedReadPolicy
//	UploadedFileMeta                    Meta
//	UploadedFileUploadOptions           UploadOptions
//	UploadedFileTemporaryUploadOptions  TemporaryUploadOptions
//	UploadedFileResult                  Result
//	UploadedFileVisibility              Visibility
//	UploadedFilePublicAccessMode        PublicAccessModeExternal, PublicAccessModeObjectACL
//	UploadedFileStatus                  Status
//	UploadedFileDisposition             Disposition
//	UploadedFileDirectLifecycle<ts>     db/migrations/20261122000000_uploaded_file_direct_lifecycle
//	UploadedFileRemoteCloneConfig       RemoteCloneConfig
//	UPLOADED_FILE_BATCH_LIMIT           BatchLimit
//	UPLOADED_FILE_REFERENCE_MAX_LENGTH  ReferenceMaxLength
//	UPLOADED_FILE_CONFIG                Service.EffectiveConfig
//
// Methods: upload (legacy) is UploadLegacy, upload (managed) Upload,
// uploadTemporary UploadTemporaryLegacy and UploadTemporary; find Find;
// findById FindByID; setExtraData SetExtraData; resolveUrl ResolveURL;
// download Download; downloadAttached DownloadAttached; markUsed MarkUsed;
// useFiles UseFiles; changeFiles ChangeFiles; delete Delete; deleteById
// DeleteByID; getContent GetContent; the unsafeSystem* and cleanup*
// maintenance operations keep their names.
//
// Raw storage drivers, key helpers and maintenance providers live under
// internal/ and cannot be imported from outside this module.
