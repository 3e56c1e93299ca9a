# frozen_string_literal: true

# GET /push?label=L enqueues a blocking job from the request and answers with this worker's pid.
require_relative "app"

run(lambda do |env|
  label = Rack::Utils.parse_query(env["QUERY_STRING"]).fetch("label", "from puma")
  ReliabilityBlockingWorker.perform_async(label) if env["PATH_INFO"] == "/push"
  [200, {"content-type" => "text/plain"}, [Process.pid.to_s]]
end)
