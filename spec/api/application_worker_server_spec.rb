# frozen_string_literal: true

require_relative "../apps/gitlab_workers"

# GitLab-style workers through a real exe/queue process: context round trips, cron workers, and the
# queues a server picks from the declared workers.
RSpec.describe "ApplicationWorkers in a server" do
  let(:redis) { TestRedis.client }

  def contexts(key)
    recorded(key).map { |r| r["context"] }
  end

  it "restores a job's context while it runs and carries it into the jobs it enqueues" do
    ContextChainWorker.with_context(user: "alice", project: "group/app") { ContextChainWorker.perform_async(1) }
    server = start_server(app: "gitlab_workers.rb", args: ["-c", "2", "-q", "context_chain"])
    wait_until("the three steps to run") { redis.llen("ran:context") == 3 }

    runs = recorded("ran:context").sort_by { |r| r["step"] }
    carried = {"meta.user" => "alice", "meta.project" => "group/app", "meta.root_namespace" => "group", "meta.feature_category" => "team_planning"}
    expect(runs.map { |r| r["context"] }).to eq(
      [carried, carried, carried.merge("meta.project" => "other-group/tool", "meta.root_namespace" => "other-group")]
    )
    expect(runs.map { |r| r["frozen"] }).to all(be(true))
    expect(server.stop.exitstatus).to eq(0)
  end

  it "restores a context whose key the job's JSON writes with an escape, and none for a job without one" do
    # The server skips looking for "meta.*" keys in a job whose JSON has neither `"meta.` nor a \u
    # escape (Context.in_json?): an escaped key must still be found.
    job = ->(jid, fields) { JSON.generate({"class" => "ContextChainWorker", "args" => [3], "jid" => jid, "queue" => "context_chain", "retry" => false}).sub(/\}\z/, fields) }
    redis.lpush("queue:context_chain", [
      job.("escaped", %q(,"m\u0065ta.user":"bob","\u006deta.project":"a/b"})),
      job.("plain", %q(,"meta.user":"carl"})),
      job.("none", %q(,"note":"\u00e9t\u00e9"})),
      job.("bare", "}")
    ])
    start_server(app: "gitlab_workers.rb", args: ["-c", "1", "-q", "context_chain"])
    wait_until("the four jobs to run") { redis.llen("ran:context") == 4 }

    expect(recorded("ran:context").to_h { |r| [r["jid"], r["context"]] }).to eq(
      "escaped" => {"meta.user" => "bob", "meta.project" => "a/b"}, "plain" => {"meta.user" => "carl"}, "none" => {}, "bare" => {}
    )
  end

  it "runs a cron worker without its caller's context, and its bulk jobs each with their own" do
    ContextChainWorker.with_context(user: "ann") { NightlyCleanupWorker.perform_async }
    start_server(app: "gitlab_workers.rb", args: ["-c", "2", "-q", "cronjob", "-q", "context_chain"])
    wait_until("the cron job and the two jobs it scheduled") { redis.llen("ran:cron") == 1 && redis.llen("ran:context") == 2 }

    expect(contexts("ran:cron")).to eq([{"meta.caller_id" => "Cronjob", "meta.feature_category" => "cleanup"}])
    expect(contexts("ran:context")).to match_array(
      %w[alpha/one beta/two].map do |path|
        {"meta.caller_id" => "Cronjob", "meta.project" => path, "meta.root_namespace" => path.split("/").first,
         "meta.feature_category" => "team_planning"}
      end
    )
  end

  describe "queues" do
    let(:declared) { %w[busy context_chain cronjob:nightly_cleanup cronjob:report_cron failing logged_arguments] }

    it "listens to every declared worker's queue and default, weighted, when none are given" do
      start_server(app: "gitlab_workers.rb", args: ["-c", "1"])
      info = registered_process_info

      expect(info["queues"]).to match_array(declared + ["default"])
      expect(info["weights"]).to eq([(declared + ["default"]).to_h { |q| [q, q == "busy" ? 3 : 1] }])
      ReportCronWorker.perform_async
      wait_until("the cron job to run") { recorded("ran:report") == [{"queue" => "cronjob:report_cron"}] }
    end

    it "expands -q <namespace> to the declared queues in it, in the order given" do
      start_server(app: "gitlab_workers.rb", args: ["-c", "1", "-q", "cronjob", "-q", "failing"])

      expect(registered_process_info["queues"]).to eq(%w[cronjob cronjob:nightly_cleanup cronjob:report_cron failing])
      ReportCronWorker.perform_async
      wait_until("the cron job to run") { redis.llen("ran:report") == 1 }
    end

    it "gives the namespace's weight to each queue in it" do
      start_server(app: "gitlab_workers.rb", args: ["-c", "1", "-q", "cronjob,4", "-q", "busy"])

      expect(registered_process_info["weights"]).to eq(
        ["cronjob" => 4, "cronjob:nightly_cleanup" => 4, "cronjob:report_cron" => 4, "busy" => 1]
      )
    end

    it "keeps the default queue for an app of plain workers" do
      start_server(app: "basic.rb", args: ["-c", "1"])

      expect(registered_process_info["queues"]).to eq(["default"])
    end
  end
end
