package db

// The lists' page statements (FileListOwnerBy*, FileListTenantBy*,
// FileListDepartmentBy* and FileListRecordBy* in queries/file_list.sql,
// not the walks) read the columns a list item is made of. Their row types
// have the same columns; each converts to FileListOwnerByCreatedRow.

// ListItemRow is a row of a list page's statement.
type ListItemRow interface {
	FileListOwnerByCreatedRow | FileListOwnerByNameRow | FileListOwnerBySizeRow |
		FileListTenantByCreatedRow | FileListTenantByNameRow | FileListTenantBySizeRow |
		FileListDepartmentByCreatedRow | FileListDepartmentByNameRow | FileListDepartmentBySizeRow |
		FileListRecordByCreatedRow | FileListRecordByNameRow | FileListRecordBySizeRow
}

// ListItems are a page's rows as the files the page is made of: the
// columns the statements read, the rest zero (no scope, no markers, no
// leases). err is returned as it is.
func ListItems[R ListItemRow](rows []R, err error) ([]UploadedFile, error) {
	if err != nil {
		return nil, err
	}
	files := make([]UploadedFile, len(rows))
	for i, r := range rows {
		f := FileListOwnerByCreatedRow(r)
		files[i] = UploadedFile{
			ID: f.ID, Key: f.Key, CDN: f.CDN, OriginalName: f.OriginalName, SizeBytes: f.SizeBytes, ContentType: f.ContentType,
			Visibility: f.Visibility, Status: f.Status, IsTemporary: f.IsTemporary, Disposition: f.Disposition,
			Checksum: f.Checksum, ETag: f.ETag, Width: f.Width, Height: f.Height, ExtraData: f.ExtraData,
			Module: f.Module, Entity: f.Entity, EntityID: f.EntityID, Type: f.Type,
			CreatedAt: f.CreatedAt, CompletedAt: f.CompletedAt, ExpiredAt: f.ExpiredAt,
		}
	}
	return files, nil
}
