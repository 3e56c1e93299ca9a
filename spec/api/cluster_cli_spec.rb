# frozen_string_literal: true

require "open3"

# `queue cluster`'s arguments, run as a user runs them (exe/queue in a subprocess): the groups each
# process would serve (--dryrun), and a clear error, exit 1, for each kind of bad input.
RSpec.describe "queue cluster arguments" do
  root = File.expand_path("../..", __dir__)

  define_method(:cluster) do |*args, env: {}|
    Open3.capture2e({"REDIS_URL" => TestRedis.url}.merge(env), RbConfig.ruby, File.join(root, "exe", "queue"), "cluster",
      "-r", File.join(root, "spec", "apps", "cluster_declared.rb"), *args, chdir: root)
  end

  it "gives one process per group, -n of each, with namespaces and '*' expanded over the declared queues" do
    output, status = cluster("--dryrun", "-n", "2", "cronjob", "mailers,default", "*")

    expect(status.exitstatus).to eq(0)
    expect(output.lines.map(&:chomp)).to eq([
      "0: cronjob,cronjob:cluster_cleanup,cronjob:cluster_import",
      "1: cronjob,cronjob:cluster_cleanup,cronjob:cluster_import",
      "2: mailers,default",
      "3: mailers,default",
      "4: cronjob:cluster_cleanup,cronjob:cluster_import,cluster_mailer,default",
      "5: cronjob:cluster_cleanup,cronjob:cluster_import,cluster_mailer,default"
    ])
  end

  it "lists its own options and the server's in -h" do
    output, status = cluster("-h")

    expect(status.exitstatus).to eq(0)
    expect(output).to include("Usage: queue cluster [options] GROUP...", "--processes N", "--max-memory SIZE",
      "--memory-check-interval SECONDS", "--concurrency INT", "--timeout NUM")
  end

  {
    [] => "queue: queue cluster needs at least one GROUP of queues (e.g. `queue cluster mailers,default '*'`)",
    ["-q", "a", "b"] => "queue: queue cluster: -q does not apply; each GROUP argument lists one process's queues",
    ["a,,b"] => 'queue: queue cluster: group "a,,b" has an empty queue name',
    ["--max-memory", "2000", "a"] => "queue: --max-memory 2000: give a size with a unit, K, M or G (e.g. 2G or 512M)",
    ["--max-memory", "0G", "a"] => "queue: --max-memory 0G: must be more than 0",
    ["-n", "0", "a"] => "queue: invalid argument: -n 0 (must be at least 1)",
    ["--memory-check-interval", "0", "a"] => "queue: invalid argument: --memory-check-interval 0.0 (must be more than 0)"
  }.each do |args, message|
    it "refuses #{args.empty? ? "no group" : args.join(" ")}, saying why" do
      output, status = cluster(*args)

      expect(status.exitstatus).to eq(1)
      expect(output.strip).to eq(message)
    end
  end

  it "refuses a NOTIFY_SOCKET it cannot use, naming it, before it forks anything" do
    output, status = cluster("a", env: {"NOTIFY_SOCKET" => "notify.sock"})

    expect(status.exitstatus).to eq(1)
    expect(output).to include('NOTIFY_SOCKET="notify.sock" is not usable')
    expect(output).not_to include("started")
  end
end
