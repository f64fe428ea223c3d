package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

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
		return withConfiguredService(ctx, g, func(s *service.Service, _ *pgxpool.Pool) error { return fn(s) })
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
		set.Flags().StringVar(v, name, "", "limit (bytes or files; 0 unlimited; default: the configured quota."+name+")")
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
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tUSED BYTES\tUSED FILES\tTENANT BYTES\tTENANT FILES\tOWNER BYTES\tOWNER FILES")
	for _, q := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", q.Tenant, q.UsedBytes, q.UsedFiles, limitText(q.TenantBytes), limitText(q.TenantFiles), limitText(q.OwnerBytes), limitText(q.OwnerFiles))
	}
	return tw.Flush()
}

func limitText(v *int64) string {
	switch {
	case v == nil:
		return "default"
	case *v == 0:
		return "unlimited"
	default:
		return strconv.FormatInt(*v, 10)
	}
}
