# frozen_string_literal: true

require_relative "cluster/groups"
require_relative "cluster/memory"
require_relative "cluster/notify"
require_relative "cluster/child"
require_relative "cluster/supervisor"
require_relative "cluster/command"

module JobQueue
  # `bundle exec queue cluster [options] GROUP...`: several server processes on one host, in
  # GitLab's sidekiq-cluster form (one process per GROUP of queues) with Sidekiq Enterprise's swarm
  # (`-n N` processes of each group), forked from one parent that loaded the app once.
  #
  # - Command (command.rb) parses the flags and the groups, boots the app in the parent, and hands the
  #   children to a Supervisor.
  # - Supervisor (supervisor.rb) forks them, restarts one that dies (with backoff), passes signals on,
  #   tells systemd about the group, and replaces a child whose RSS passes `--max-memory`.
  # - Child (child.rb) is one slot: its index, its queues, the process in it now, and what runs in the
  #   forked process.
  #
  # Nothing of the engine runs in the parent before it forks: a connection it used to load the app
  # (a push, the cron schedule) belongs to its thread and remembers its pid, so a child dials its own
  # (ext/queue/src/ruby_api/engine.rs); servers, runtimes and threads are started in each child.
  module Cluster
  end
end
