package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

// benchStagingHeld is the bucket's bytes per ready byte after a burst of
// direct uploads on S3: right after they complete, each file is
// held twice -- its staging copy is kept while its upload target could
// still write (the re-PUT guarantee) -- and one target lifetime later,
// once the staging cleanup ran, once. The lifetime is not waited out: the
// rows' staging due time (target expiry plus the clock-skew margin) is
// dated to now, as that much time passing would, and the cleanup runs as
// an operator's `maintenance cleanup-staging` would.
func benchStagingHeld(ctx context.Context, e *env, rep *report, bin string, gw *s3test.Server, ids []string, held0 int64, ready int) error {
	held1, err := bucketBytes(ctx, gw, "bench")
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, e.dsnS3)
	if err != nil {
		return err
	}
	defer pool.Close()
	tag, err := pool.Exec(ctx, `UPDATE uploaded_file SET staging_cleanup_at = now() WHERE id = ANY($1::uuid[]) AND staging_cleanup_at IS NOT NULL`, ids)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return fmt.Errorf("staging: %d of %d completed uploads keep a staging copy", tag.RowsAffected(), len(ids))
	}
	out, err := exec.CommandContext(ctx, bin, "--database-url", e.dsnS3, "maintenance", "--config", e.s3Config, "cleanup-staging").CombinedOutput()
	if err != nil {
		return fmt.Errorf("maintenance cleanup-staging: %w: %s", err, out)
	}
	held2, err := bucketBytes(ctx, gw, "bench")
	if err != nil {
		return err
	}
	after, later := float64(held1-held0)/float64(ready), float64(held2-held0)/float64(ready)
	rep.add("direct uploads on S3: bucket bytes per ready byte, right after complete and one target lifetime later (staging cleanup run)",
		fmt.Sprintf("%.2f right after; %.2f one target lifetime later", after, later), "1.00 later", later <= 1.0)
	return nil
}

// bucketBytes sums the sizes of every object in bucket.
func bucketBytes(ctx context.Context, gw *s3test.Server, bucket string) (int64, error) {
	var total int64
	pages := awss3.NewListObjectsV2Paginator(gw.Client(), &awss3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		for _, o := range page.Contents {
			if o.Size != nil {
				total += *o.Size
			}
		}
	}
	return total, nil
}

// putObjects writes body under every key keys gives (32 at a time) and
// returns the first failure.
func putObjects(ctx context.Context, client *awss3.Client, bucket, body string, keys func(each func(key string) error) error) error {
	next := make(chan string)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range 32 {
		wg.Go(func() {
			for k := range next {
				if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &k, Body: strings.NewReader(body)}); err != nil {
					once.Do(func() { first = fmt.Errorf("put %s: %w", k, err) })
				}
			}
		})
	}
	err := keys(func(k string) error { next <- k; return nil })
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return err
}
