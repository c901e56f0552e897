// `ladder token create | list | revoke`.
#include <chrono>
#include <iostream>

#include "client.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/common/time.h"
#include "ladder/db/schema.h"
#include "ladder/db/tokens.h"

namespace ladder::cli {
namespace {}  // namespace

void AddTokenCommands(CLI::App& app) {
  auto* token = app.add_subcommand(
      "token",
      "Manage access tokens. Agents join with an agent token; submit, cancel, queries and token "
      "management need an admin token. Only a hash of each secret is stored.\n"
      "Bootstrap: `ladder token create --role admin --db results.db` before the coordinator "
      "first starts; after that, manage tokens through the coordinator with an admin token.");
  token->require_subcommand(1);
  {
    struct Flags : ClientFlags {
      std::string role = "agent", expires, description, db;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = token->add_subcommand(
        "create", "Create a token and print it once on stdout (store it in a file, mode 0600).");
    cmd->add_option("--role", flags->role, "agent | admin")
        ->check(CLI::IsMember({"agent", "admin"}))
        ->capture_default_str();
    cmd->add_option("--expires", flags->expires, "lifetime such as 7d, 12h, 30m (default: never)");
    cmd->add_option("--description", flags->description, "what the token is for");
    cmd->add_option("--db", flags->db,
                    "write into this database directly instead of asking the coordinator "
                    "(for the first admin token)");
    AddClientFlags(cmd, *flags);
    cmd->callback([flags] {
      auto expires = db::ParseDurationMs(flags->expires);
      if (!expires.ok()) Fail(expires.status(), ExitCode::kBadInput);
      auto role = db::ParseRole(flags->role);
      if (!role.ok()) Fail(role.status(), ExitCode::kBadInput);
      if (!flags->db.empty()) {
        auto database = db::Database::Open(flags->db, db::OpenMode::kReadWrite);
        if (!database.ok()) Fail(database.status());
        if (auto migrated = db::Migrate(**database); !migrated.ok()) Fail(migrated);
        auto created =
            db::CreateToken(**database, *role, flags->description, *expires, UnixNowMs());
        if (!created.ok()) Fail(created.status());
        std::cerr << "created " << flags->role << " token " << created->info.id
                  << " (shown once)\n";
        std::cout << created->plaintext << "\n";
        return;
      }
      AdminClient client(flags->Options());
      auto created = client.CreateToken(flags->role, flags->description, *expires);
      if (!created.ok()) Fail(created.status());
      std::cerr << "created " << flags->role << " token " << created->info().id()
                << " (shown once)\n";
      std::cout << created->token() << "\n";
    });
  }
  {
    auto flags = std::make_shared<ClientFlags>();
    auto* cmd = token->add_subcommand("list", "List tokens (ids, roles, expiry; never secrets).");
    AddClientFlags(cmd, *flags);
    cmd->callback([flags] {
      AdminClient client(flags->Options());
      auto tokens = client.ListTokens();
      if (!tokens.ok()) Fail(tokens.status());
      std::vector<std::vector<std::string>> rows;
      for (const auto& t : tokens->tokens()) {
        rows.push_back({t.id(), t.role(), t.revoked_at_ms() ? "revoked" : "live",
                        FormatTimeMs(t.created_at_ms()),
                        t.expires_at_ms() ? FormatTimeMs(t.expires_at_ms()) : "never",
                        t.description()});
      }
      std::cout << RenderTable({"id", "role", "state", "created", "expires", "description"}, rows);
    });
  }
  {
    struct Flags : ClientFlags {
      std::string id;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = token->add_subcommand(
        "revoke", "Revoke a token: every call presenting it is refused from the next one on.");
    cmd->add_option("id", flags->id, "token id (the part after ladder_)")->required();
    AddClientFlags(cmd, *flags);
    cmd->callback([flags] {
      AdminClient client(flags->Options());
      if (auto s = client.RevokeToken(flags->id); !s.ok()) Fail(s);
      std::cerr << "revoked " << flags->id << "\n";
    });
  }
}

}  // namespace ladder::cli
