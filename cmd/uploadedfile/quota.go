package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// newQuotaCommand is the operators' entry to per-tenant storage limits.
func newQuotaCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Show and set per-tenant storage limits (overrides of quota.*)",
		Example: `  uploadedfile quota set acme --tenant-bytes 10737418240 --owner-files 500
  uploadedfile quota get acme
  uploadedfile quota list`,
	}
	withService := func(ctx context.Context, fn func(*service.Service) error) error {
		return withConfiguredService(ctx, g, func(s *service.Service, _ *db.Pool) error { return fn(s) })
	}

	limits := map[string]*string{"tenant-bytes": new(string), "tenant-files": new(string), "owner-bytes": new(string), "owner-files": new(string)}
	set := &cobra.Command{
		Use:   "set <tenant> [--tenant-bytes N] [--tenant-files N] [--owner-bytes N] [--owner-files N]",
		Short: "Override a tenant's limits: a number (0 unlimited), or default to go back to quota.*",
		Example: `  uploadedfile quota set acme --tenant-bytes 10737418240
  uploadedfile quota set acme --owner-files 0
  uploadedfile quota set acme --tenant-bytes default`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var o service.QuotaOverride
			for flag, dst := range map[string]**int64{"tenant-bytes": &o.TenantBytes, "tenant-files": &o.TenantFiles, "owner-bytes": &o.OwnerBytes, "owner-files": &o.OwnerFiles} {
				v, err := limitValue(flag, *limits[flag], cmd.Flags().Changed(flag))
				if err != nil {
					return err
				}
				*dst = v
			}
			return withService(cmd.Context(), func(s *service.Service) error {
				if err := s.UnsafeSystemSetQuota(cmd.Context(), args[0], o); err != nil {
					return fmt.Errorf("quota set: %w", err)
				}
				return printQuotas(cmd.Context(), g, s, args[0])
			})
		},
	}
	for name, v := range limits {
		set.Flags().StringVar(v, name, "", "limit (bytes or files; 0 unlimited; default: back to the configured "+quotaKeys[name]+")")
	}
	get := &cobra.Command{
		Use:     "get <tenant>",
		Short:   "Show a tenant's overrides and usage",
		Example: "  uploadedfile quota get acme",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), func(s *service.Service) error { return printQuotas(cmd.Context(), g, s, args[0]) })
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Short:   "Show every tenant with an override or a usage",
		Example: "  uploadedfile quota list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withService(cmd.Context(), func(s *service.Service) error { return printQuotas(cmd.Context(), g, s, "") })
		},
	}
	cmd.AddCommand(set, get, list)
	return cmd
}

// quotaKeys are the configuration keys of the limit flags' defaults.
var quotaKeys = map[string]string{"tenant-bytes": "quota.tenantBytes", "tenant-files": "quota.tenantFiles", "owner-bytes": "quota.ownerBytes", "owner-files": "quota.ownerFiles"}

// limitValue parses one limit flag: unset is nil (keep), "default" is -1
// (back to quota.*), otherwise a count of at least 0.
func limitValue(flag, v string, given bool) (*int64, error) {
	if !given {
		return nil, nil
	}
	if v == "default" {
		d := int64(-1)
		return &d, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("quota set: --%s must be a number of at least 0, or default", flag)
	}
	return &n, nil
}

func printQuotas(ctx context.Context, g *globals, s *service.Service, tenant string) error {
	rows, err := s.UnsafeSystemQuotas(ctx, tenant, 10_000)
	if err != nil {
		return err
	}
	def := s.EffectiveConfig().Quota
	if g.output == "json" {
		for _, q := range rows {
			v := map[string]any{"tenant": q.Tenant, "usedBytes": q.UsedBytes, "usedFiles": q.UsedFiles,
				"tenantBytes": effective(q.TenantBytes, def.TenantBytes), "tenantFiles": effective(q.TenantFiles, def.TenantFiles),
				"ownerBytes": effective(q.OwnerBytes, def.OwnerBytes), "ownerFiles": effective(q.OwnerFiles, def.OwnerFiles)}
			if err := g.emit("", v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tUSED BYTES\tUSED FILES\tTENANT BYTES\tTENANT FILES\tOWNER BYTES\tOWNER FILES")
	for _, q := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", q.Tenant, q.UsedBytes, q.UsedFiles,
			effective(q.TenantBytes, def.TenantBytes).text(), effective(q.TenantFiles, def.TenantFiles).text(),
			effective(q.OwnerBytes, def.OwnerBytes).text(), effective(q.OwnerFiles, def.OwnerFiles).text())
	}
	return tw.Flush()
}

// limit is a limit in force and where it comes from.
type limit struct {
	Value  int64  `json:"value"` // 0: unlimited
	Source string `json:"source"`
}

// effective is the limit in force: the tenant's override, else the
// configured default.
func effective(override *int64, def int64) limit {
	if override != nil {
		return limit{Value: *override, Source: "override"}
	}
	return limit{Value: def, Source: "default"}
}

func (l limit) text() string {
	v := strconv.FormatInt(l.Value, 10)
	if l.Value == 0 {
		v = "unlimited"
	}
	if l.Source == "default" {
		v += " (default)"
	}
	return v
}
