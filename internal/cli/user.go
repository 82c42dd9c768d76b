package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/controller"
)

// roles are the roles a user may have, least privileged first.
var roles = []string{"user", "operator", "admin", "agent"}

func newUserCmd() *cobra.Command {
	var o ctlFlags
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage the controller's users and their tokens",
		Long: `Add users to the controller and manage their tokens.

Roles: user (books and sees its own reservations), operator (sees and acts
on everyone's), admin (also manages users, the topology and the policy) and
agent (a node's agent). A fresh controller has one user, admin, whose token
it writes to its --admin-token-file.

Admins may do everything here; users may create, list and revoke their own
tokens. Every verb takes --controller, --controller-token-file and --json
as lightpath reserve does.`,
		Example: `  export LIGHTPATH_CONTROLLER_TOKEN=$(cat /var/lib/lightpath/admin.token)
  lightpath user add alice --role user --project cms
  lightpath user token create alice --expires-in 720h --out alice.token
  lightpath user list
  lightpath user token list alice
  lightpath user token revoke t-5d2f`,
	}
	o.register(cmd.PersistentFlags())
	verbGroup(cmd)
	cmd.AddCommand(newUserAddCmd(&o), newUserListCmd(&o), newUserWhoamiCmd(&o), newUserTokenCmd(&o))
	return cmd
}

func newUserAddCmd(o *ctlFlags) *cobra.Command {
	var role, node string
	var projects []string
	cmd := &cobra.Command{
		Use:   "add NAME --role user|operator|admin|agent [--project P]... [--node NODE]",
		Short: "Add a user (admins)",
		Long: `Add a user with a role and the projects it may book under (--project,
repeated or comma-separated). The user has no token yet: create one with
lightpath user token create NAME.

An agent is bound to the node it runs on with --node: the controller then
takes its heartbeats, reports and metrics for that node (and the links
that end at it) alone. An agent added without --node may only create
tokens bound to a node for itself (user token create NAME --node NODE),
which lightpath agent does by itself on its first start.`,
		Example: `  lightpath user add alice --role user --project cms --project atlas
  lightpath user add ops1 --role operator
  lightpath user add agent-r1 --role agent --node r1`,
		Args: exactArgs("user add", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "user add"
			if !slices.Contains(roles, role) {
				return fmt.Errorf("%s: --role %q: want one of %s", what, role, strings.Join(roles, ", "))
			}
			u, err := fetch(o, what, func(c *client.Client) (apiv1.User, error) {
				return c.AddUser(cmd.Context(), apiv1.UserRequest{Name: args[0], Role: role, Projects: projects, Node: node})
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, u, "added %s (%s%s%s); give them a token: lightpath user token create %s\n",
				u.Name, u.Role, projectsNote(u.Projects), nodeNote(u.Node), u.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "the user's role: "+strings.Join(roles, ", "))
	cmd.Flags().StringSliceVar(&projects, "project", nil, "a project the user may book under (repeatable)")
	cmd.Flags().StringVar(&node, "node", "", "role agent: the node it acts for (all its tokens are bound to it)")
	return cmd
}

func nodeNote(n string) string {
	if n == "" {
		return ""
	}
	return ", node " + n
}

func projectsNote(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	return ", projects " + strings.Join(ps, ", ")
}

func newUserListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List users (admins)",
		Example: `  lightpath user list
  lightpath user list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			us, err := fetch(o, "user list", func(c *client.Client) ([]apiv1.User, error) { return c.Users(cmd.Context()) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, us, "", printUsers) // the header alone says there are none
			return nil
		},
	}
}

func printUsers(w io.Writer, us []apiv1.User) {
	printTable(w, []string{"NAME", "ROLE", "PROJECTS", "CREATED"}, us, func(u apiv1.User) []string {
		return []string{u.Name, u.Role, orDash(strings.Join(u.Projects, ",")), fmtTime(u.CreatedAt)}
	})
}

func newUserWhoamiCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "whoami",
		Short:   "Show whose token this is: the user, role and projects",
		Example: `  lightpath user whoami --controller-token-file alice.token`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var at string // the controller, as the flags or the environment named it
			w, err := fetch(o, "user whoami", func(c *client.Client) (apiv1.Whoami, error) {
				at = c.URL()
				return c.Whoami(cmd.Context())
			})
			if err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, w, "%s (%s%s%s) at %s\n", w.User, w.Role, projectsNote(w.Projects), nodeNote(w.Node), at)
			return nil
		},
	}
}

func newUserTokenCmd(o *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke users' tokens",
		Long: `A token is the secret a client sends to the controller as its user. The
controller keeps only its hash, so the secret is shown once, when it is
created.`,
		Example: `  lightpath user token create alice --expires-in 720h --out alice.token
  lightpath user token list alice
  lightpath user token revoke t-5d2f`,
	}
	cmd.AddCommand(newTokenCreateCmd(o), newTokenListCmd(o), newTokenRevokeCmd(o))
	return verbGroup(cmd)
}

func newTokenCreateCmd(o *ctlFlags) *cobra.Command {
	var expires, outFile, node string
	cmd := &cobra.Command{
		Use:   "create NAME [--expires-in D] [--out FILE] [--node NODE]",
		Short: "Create a token for a user; the secret is shown this once",
		Long: `Create a token for user NAME (admins for anyone, users for themselves).
The secret is printed alone on stdout (so that > FILE captures it), or with
--out written to FILE with mode 0600; it cannot be shown again. Without
--expires-in the token never expires; revoke it when it is no longer
needed. --node binds an agent's token to the node it runs on: the
controller takes its word for that node alone.`,
		Example: `  lightpath user token create alice --out alice.token
  lightpath user token create alice --expires-in 30d
  lightpath user token create agents --node ra --out ra.token
  LIGHTPATH_CONTROLLER_TOKEN=$(lightpath user token create alice --expires-in 1h) lightpath reserve list`,
		Args: exactArgs("user token create", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			const what = "user token create"
			req := apiv1.TokenRequest{Node: node}
			if expires != "" {
				d, err := parseSpan(expires)
				if err != nil {
					return fmt.Errorf("%s: --expires-in: %w", what, err)
				}
				req.ExpiresIn = d.String()
			}
			if outFile != "" {
				// Fail before the token exists rather than after.
				if fi, err := os.Stat(filepath.Dir(outFile)); err != nil || !fi.IsDir() {
					return fmt.Errorf("%s: --out %s: its directory does not exist", what, outFile)
				}
			}
			t, err := fetch(o, what, func(c *client.Client) (apiv1.Token, error) { return c.CreateToken(cmd.Context(), args[0], req) })
			if err != nil {
				return err
			}
			if t.Secret == "" {
				return fmt.Errorf("%s: the controller created token %s but sent no secret", what, t.ID)
			}
			out := cmd.OutOrStdout()
			if outFile != "" {
				if err := writeSecret(outFile, t.Secret); err != nil {
					return fmt.Errorf("%s: token %s was created but not saved (revoke it: lightpath user token revoke %s): %w", what, t.ID, t.ID, err)
				}
			}
			switch {
			case o.json:
				if outFile != "" {
					t.Secret = ""
				}
				(&ndjson{w: out}).write(t)
			case outFile != "":
				fmt.Fprintf(out, "token %s for %s (%s%s) written to %s\n", t.ID, t.User, expiry(t), nodeNote(t.Node), outFile)
			default:
				fmt.Fprintln(out, t.Secret)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&expires, "expires-in", "", "how long the token is valid, e.g. 720h or 30d (default: until revoked)")
	cmd.Flags().StringVar(&outFile, "out", "", "write the secret to this file (mode 0600) instead of stdout")
	cmd.Flags().StringVar(&node, "node", "", "bind an agent's token to this node")
	return cmd
}

func expiry(t apiv1.Token) string {
	if t.ExpiresAt.IsZero() {
		return "never expires"
	}
	return "expires " + fmtTime(t.ExpiresAt)
}

// writeSecret writes a token to file with mode 0600, whole or not at all.
func writeSecret(file, secret string) error { return controller.WriteSecretFile(file, secret) }

func newTokenListCmd(o *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list NAME",
		Aliases: []string{"ls"},
		Short:   "List a user's tokens (never their secrets)",
		Example: `  lightpath user token list alice`,
		Args:    exactArgs("user token list", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := fetch(o, "user token list", func(c *client.Client) ([]apiv1.Token, error) { return c.Tokens(cmd.Context(), args[0]) })
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), o.json, ts, "", printTokens)
			return nil
		},
	}
}

func printTokens(w io.Writer, ts []apiv1.Token) {
	printTable(w, []string{"ID", "USER", "CREATED", "EXPIRES", "REVOKED"}, ts, func(t apiv1.Token) []string {
		exp := "never"
		if !t.ExpiresAt.IsZero() {
			exp = fmtTime(t.ExpiresAt)
		}
		return []string{t.ID, t.User, fmtTime(t.CreatedAt), exp, fmtTime(t.RevokedAt)}
	})
}

// revokeSummary is token revoke's --json line.
type revokeSummary struct {
	Summary bool   `json:"summary"`
	Revoked string `json:"revoked"`
}

func newTokenRevokeCmd(o *ctlFlags) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "revoke ID | --user NAME",
		Short: "Revoke a token, or every token of a user: they stop working at once",
		Long: `Revoke a token: it stops working at once, and the event and live streams
opened with it end. With --user NAME, every token of that user is revoked
(an admin may do it to anyone, a user to themself: signing out everywhere):
the user is locked out until a new token is made.`,
		Example: `  lightpath user token revoke t-5d2f
  lightpath user token revoke --user alice`,
		Args: func(cmd *cobra.Command, args []string) error {
			if user != "" {
				if len(args) > 0 {
					return fmt.Errorf("user token revoke: give a token ID or --user NAME, not both")
				}
				return nil
			}
			return exactArgs("user token revoke", "ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if user != "" {
				var ts []apiv1.Token
				if err := o.request("user token revoke", func(c *client.Client) (err error) {
					ts, err = c.RevokeUserTokens(cmd.Context(), user)
					return err
				}); err != nil {
					return err
				}
				ids := make([]string, len(ts))
				for i, t := range ts {
					ids[i] = t.ID
				}
				printOne(cmd.OutOrStdout(), o.json, revokeSummary{Summary: true, Revoked: strings.Join(ids, ",")},
					"revoked %d token(s) of %s%s\n", len(ts), user, listSuffix(ids))
				return nil
			}
			if err := o.request("user token revoke", func(c *client.Client) error { return c.RevokeToken(cmd.Context(), args[0]) }); err != nil {
				return err
			}
			printOne(cmd.OutOrStdout(), o.json, revokeSummary{Summary: true, Revoked: args[0]}, "revoked token %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "revoke every token of this user")
	return cmd
}

// listSuffix is ": a, b" for a non-empty list.
func listSuffix(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ": " + strings.Join(ids, ", ")
}
