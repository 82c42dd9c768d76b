package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/transfer"
)

func newEndpointCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "List the transfer service's endpoints and their data nodes; say who may use one",
		Long: `An endpoint is one site's storage, served by its data nodes (lightpath serve
--controller --node NODE --endpoint NAME); every data node of an endpoint
sees the same files. An endpoint appears when its first data node
registers. "list" shows each endpoint, its site, and its data nodes, alive
(lease held) or gone, with the address other nodes push to. "allow" (an
admin's) says who may use an endpoint: users and projects; an endpoint
nobody was allowed on is for admins and operators only.

Every verb takes --controller, --controller-token-file and --json as
lightpath reserve does. See docs/service.md.`,
		Example: `  lightpath endpoint list
  lightpath endpoint allow cern --project cms
  lightpath endpoint allow cern --user alice --remove`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newEndpointListCmd(&o), newEndpointAllowCmd(&o))
	return cmd
}

// endpointRow is one line of endpoint list: an endpoint and one of its
// data nodes (or none).
type endpointRow struct {
	ep   transfer.Endpoint
	node *transfer.DataNode
}

func newEndpointListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the endpoints, their site and their data nodes, alive or gone",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eps, err := fetch(o, "endpoint list", func(c *client.Client) ([]transfer.Endpoint, error) { return c.Endpoints(cmd.Context()) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, eps, "no endpoints: no data node has registered", func(w io.Writer, eps []transfer.Endpoint) {
				var rows []endpointRow
				for _, ep := range eps {
					if len(ep.Nodes) == 0 {
						rows = append(rows, endpointRow{ep: ep})
					}
					for i := range ep.Nodes {
						rows = append(rows, endpointRow{ep: ep, node: &ep.Nodes[i]})
					}
				}
				printTable(w, []string{"ENDPOINT", "SITE", "NODE", "STATE", "ADDRESS", "MAX RATE", "LEASE EXPIRES", "ALLOWED"}, rows, func(r endpointRow) []string {
					cells := []string{r.ep.Name, orDash(r.ep.Site), "-", "-", "-", "-", "-", allowedOf(r.ep)}
					if n := r.node; n != nil {
						state := "alive"
						if !n.Alive {
							state = "gone"
						}
						rate := "-"
						if n.MaxRateBps > 0 {
							rate = fmtRate(n.MaxRateBps)
						}
						cells[2], cells[3], cells[4], cells[5], cells[6] = n.Node, state, n.Address, rate, fmtTime(n.LeaseExpires)
					}
					return cells
				})
			})
			return nil
		},
	}
}

// allowedOf words who may use an endpoint.
func allowedOf(ep transfer.Endpoint) string {
	var parts []string
	if len(ep.Users) > 0 {
		parts = append(parts, "users "+strings.Join(ep.Users, ","))
	}
	if len(ep.Projects) > 0 {
		parts = append(parts, "projects "+strings.Join(ep.Projects, ","))
	}
	if len(parts) == 0 {
		return "admins only"
	}
	return strings.Join(parts, "; ")
}

func newEndpointAllowCmd(o *ctlFlags) *cobra.Command {
	var (
		users, projects []string
		remove          bool
	)
	cmd := &cobra.Command{
		Use:   "allow NAME --user U | --project P [--remove]",
		Short: "Let users or projects use an endpoint (or, with --remove, no longer)",
		Long: `Let the users (--user, repeatable) and the projects (--project, repeatable)
use endpoint NAME as a job's source or destination; --remove takes them
away instead. Admins only. An endpoint nobody is allowed on is for admins
and operators alone.`,
		Example: `  lightpath endpoint allow cern --project cms --project atlas
  lightpath endpoint allow fnal --user alice
  lightpath endpoint allow fnal --user alice --remove`,
		Args: exactArgs("endpoint allow", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "endpoint allow"
			if len(users) == 0 && len(projects) == 0 {
				return fmt.Errorf("%s: give --user or --project (who may use endpoint %s)", what, args[0])
			}
			for _, v := range append(append([]string{}, users...), projects...) {
				if strings.TrimSpace(v) == "" {
					return errors.New(what + ": an empty --user or --project")
				}
			}
			ep, err := fetch(o, what, func(c *client.Client) (transfer.Endpoint, error) {
				return c.AllowEndpoint(cmd.Context(), args[0], apiv1.EndpointAllow{Users: users, Projects: projects, Remove: remove})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, ep, "endpoint %s: %s\n", ep.Name, allowedOf(ep))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&users, "user", nil, "a user who may use the endpoint (repeatable)")
	f.StringArrayVar(&projects, "project", nil, "a project whose members may use the endpoint (repeatable)")
	f.BoolVar(&remove, "remove", false, "take the users and projects away instead")
	return cmd
}
