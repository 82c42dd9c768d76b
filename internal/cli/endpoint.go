package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/units"
)

func newEndpointCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "Add, remove and list the transfer service's endpoints and their data nodes; say who may use one",
		Long: `An endpoint is one site's storage, served by its data nodes (lightpath serve
--controller --node NODE --endpoint NAME); every data node of an endpoint
sees the same files. Which nodes serve an endpoint is an admin's
decision: "add" (an admin's) creates an endpoint at a site with the nodes
that may serve it, or adds nodes to one; a data node registers only for
an endpoint that lists its node (one whose controller token is an
admin's creates its endpoint and joins it by itself). "remove" removes an
endpoint, or with --node only those nodes from it. "list" shows each
endpoint, its site, and its data nodes, alive (lease held) or gone, with
the address other nodes push to and the free space of the node's root as
its last heartbeat said. "allow" (an admin's) says who may use an
endpoint: users and projects; an endpoint nobody was allowed on is for
admins and operators only.

Every verb takes --controller, --controller-token-file and --json as
lightpath reserve does. See docs/service.md.`,
		Example: `  lightpath endpoint add cern --site geneva --node dtn1,dtn2
  lightpath endpoint list
  lightpath endpoint allow cern --project cms
  lightpath endpoint allow cern --user alice --remove`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newEndpointAddCmd(&o), newEndpointRemoveCmd(&o), newEndpointListCmd(&o), newEndpointAllowCmd(&o))
	return cmd
}

// endpointRow is one line of endpoint list: an endpoint and one of its
// data nodes (or none).
type endpointRow struct {
	ep     transfer.Endpoint
	node   *transfer.DataNode
	listed string // a node the endpoint lists that has not registered
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
			printList(cmd.OutOrStdout(), o.json, eps, "no endpoints: add one (lightpath endpoint add NAME --site S --node N)", func(w io.Writer, eps []transfer.Endpoint) {
				var rows []endpointRow
				for _, ep := range eps {
					if len(ep.Nodes) == 0 && len(ep.Members) == 0 {
						rows = append(rows, endpointRow{ep: ep})
					}
					for i := range ep.Nodes {
						rows = append(rows, endpointRow{ep: ep, node: &ep.Nodes[i]})
					}
					// Listed nodes that have not registered yet.
					for _, m := range ep.Members {
						if !slices.ContainsFunc(ep.Nodes, func(n transfer.DataNode) bool { return n.Node == m }) {
							rows = append(rows, endpointRow{ep: ep, listed: m})
						}
					}
				}
				printTable(w, []string{"ENDPOINT", "SITE", "NODE", "STATE", "ADDRESS", "MAX RATE", "FREE", "LEASE EXPIRES", "ALLOWED"}, rows, func(r endpointRow) []string {
					cells := []string{r.ep.Name, orDash(r.ep.Site), "-", "-", "-", "-", "-", "-", allowedOf(r.ep)}
					if r.listed != "" {
						cells[2], cells[3] = r.listed, "not registered"
					}
					if n := r.node; n != nil {
						state := "alive"
						if !n.Alive {
							state = "gone"
						}
						rate := "-"
						if n.MaxRateBps > 0 {
							rate = fmtRate(n.MaxRateBps)
						}
						free := "-" // a node that never said (one fronting a storage system)
						if !n.FreeBytesAt.IsZero() {
							free = units.FormatSize(n.FreeBytes)
						}
						cells[2], cells[3], cells[4], cells[5], cells[6], cells[7] = n.Node, state, n.Address, rate, free, fmtTime(n.LeaseExpires)
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

func newEndpointAddCmd(o *ctlFlags) *cobra.Command {
	var (
		site  string
		nodes []string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --site S [--node N,...]",
		Short: "Create an endpoint at a site with the data nodes that may serve it, or add nodes to one",
		Long: `Create endpoint NAME at site S (of the topology) with the nodes (--node,
comma-separated or repeated; hosts of site S) whose data nodes may serve
it, or add those nodes to endpoint NAME if it exists at S. Admins only. A
data node (lightpath serve --controller --node N --endpoint NAME)
registers only for an endpoint that lists N, and for no other while it
is registered: no node makes itself a data node of an endpoint, nor moves
to another one.`,
		Example: `  lightpath endpoint add cern --site geneva --node dtn1,dtn2
  lightpath endpoint add cern --site geneva --node dtn3`,
		Args: exactArgs("endpoint add", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "endpoint add"
			if site == "" {
				return fmt.Errorf("%s: give --site (the topology site of endpoint %s)", what, args[0])
			}
			for _, n := range nodes {
				if strings.TrimSpace(n) == "" {
					return errors.New(what + ": an empty --node")
				}
			}
			ep, err := fetch(o, what, func(c *client.Client) (transfer.Endpoint, error) {
				return c.AddEndpoint(cmd.Context(), apiv1.EndpointAdd{Name: args[0], Site: site, Nodes: nodes})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, ep, "endpoint %s at site %s: data nodes %s\n", ep.Name, ep.Site, membersOf(ep))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&site, "site", "", "the topology site of the endpoint")
	f.StringSliceVar(&nodes, "node", nil, "nodes that may serve the endpoint (comma-separated or repeated)")
	return cmd
}

func newEndpointRemoveCmd(o *ctlFlags) *cobra.Command {
	var nodes []string
	cmd := &cobra.Command{
		Use:   "remove NAME [--node N,...]",
		Short: "Remove an endpoint, or only some of its data nodes",
		Long: `Remove endpoint NAME and its data nodes' registrations, or with --node
(comma-separated or repeated) only those nodes from its list: they take
no more of its tasks, and their heartbeats for it are refused (a node
may then be added to another endpoint). Admins only. An endpoint that
unfinished jobs use is kept: cancel them or let them end first.`,
		Example: `  lightpath endpoint remove cern --node dtn2
  lightpath endpoint remove cern`,
		Args: exactArgs("endpoint remove", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "endpoint remove"
			for _, n := range nodes {
				if strings.TrimSpace(n) == "" {
					return errors.New(what + ": an empty --node")
				}
			}
			if len(nodes) == 0 {
				if _, err := fetch(o, what, func(c *client.Client) (struct{}, error) {
					return struct{}{}, c.RemoveEndpoint(cmd.Context(), args[0])
				}); err != nil {
					return err
				}
				printOne(cmd.OutOrStdout(), o.json, map[string]string{"removed": args[0]}, "endpoint %s removed\n", args[0])
				return nil
			}
			var ep transfer.Endpoint
			for _, n := range nodes {
				var err error
				if ep, err = fetch(o, what, func(c *client.Client) (transfer.Endpoint, error) {
					return c.RemoveEndpointNode(cmd.Context(), args[0], n)
				}); err != nil {
					return err
				}
			}
			printOne(cmd.OutOrStdout(), o.json, ep, "endpoint %s at site %s: data nodes %s\n", ep.Name, ep.Site, membersOf(ep))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "remove only these nodes from the endpoint (comma-separated or repeated)")
	return cmd
}

// membersOf words the nodes that may serve an endpoint.
func membersOf(ep transfer.Endpoint) string {
	if len(ep.Members) == 0 {
		return "none (a data node with an admin's token may still join)"
	}
	return strings.Join(ep.Members, ",")
}
