#!/usr/bin/env ruby
# frozen_string_literal: true

# How fast the dashboard's pages answer with big sets: 1,000,000 jobs in one queue and 100,000 in the
# retry set, with 100,000 idempotency keys held (QUEUED / RETRYING / HELD to change), on a redis-server of the benchmark's own, filled in Redis
# by a Lua loop. The dashboard runs on Puma in this process and each page is fetched N times over one
# keep-alive HTTP connection, as a browser would; the report gives each page's p50 and p99.
#
#   ruby bench/web.rb                 # N=100 requests per page; goal: every p99 <= 50 ms
#
# Pages deep inside a set (the middle page of the queue and of the retries) are measured too: a page
# must not cost more there than at the start.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "redis"
require "net/http"
require "puma"
require "puma/server"
require "puma/events"
require "queue"
require "queue/web"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/cpu"

module Bench
  module Web
    QUEUED = Integer(ENV.fetch("QUEUED", "1000000"))
    RETRYING = Integer(ENV.fetch("RETRYING", "100000"))
    HELD = Integer(ENV.fetch("HELD", "100000")) # idempotency keys held
    REQUESTS = Integer(ENV.fetch("N", "100"))
    WARMUP = 5
    GOAL_MS = 50.0

    module_function

    def run
      redis = RedisServer.new.start
      JobQueue.configure { |c| c.redis = {url: redis.url} }
      JobQueue.config.logger.level = Logger::WARN
      fill(redis.client)
      load_before = Cpu.loadavg
      port, server = serve
      timings = pages(redis.client).to_h { |label, path| [label, measure(port, path)] }
      load_after = Cpu.loadavg
      report(timings, redis.version, load_before, load_after)
    ensure
      server&.stop(true)
      redis&.stop
    end

    # Jobs as Sidekiq's client writes them; one in a thousand of class "Rare" (what a search finds).
    def fill(client)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      client.eval(<<~LUA, keys: ["queue:big", "retry", "queues"], argv: [QUEUED, RETRYING, Time.now.to_f, HELD])
        local now = tonumber(ARGV[3])
        local function job(i, class, extra)
          return '{"class":"' .. class .. '","args":[' .. i .. ',"some text"],"jid":"' .. string.format('%024x', i) ..
            '","queue":"big","created_at":' .. now .. ',"enqueued_at":' .. now .. extra .. '}'
        end
        local batch = {}
        for i = 1, tonumber(ARGV[1]) do
          batch[#batch + 1] = job(i, i % 1000 == 0 and 'Rare' or 'Common', '')
          if #batch == 1000 then redis.call('LPUSH', KEYS[1], unpack(batch)); batch = {} end
        end
        if #batch > 0 then redis.call('LPUSH', KEYS[1], unpack(batch)) end
        batch = {}
        local failure = ',"retry":true,"retry_count":2,"error_class":"RuntimeError","error_message":"boom","failed_at":' .. now
        for i = 1, tonumber(ARGV[2]) do
          batch[#batch + 1] = now + 60 + i
          batch[#batch + 1] = job(i, i % 1000 == 0 and 'Rare' or 'Common', failure)
          if #batch == 2000 then redis.call('ZADD', KEYS[2], unpack(batch)); batch = {} end
        end
        if #batch > 0 then redis.call('ZADD', KEYS[2], unpack(batch)) end
        redis.call('SADD', KEYS[3], 'big')
        for i = 1, tonumber(ARGV[4]) do
          redis.call('SET', 'duplicate:big:' .. string.format('%064x', i), string.format('%024x', i), 'EX', 3600)
        end
        return 1
      LUA
      warn format("filled %s queued and %s retrying jobs in %.1f s", Report.num(QUEUED), Report.num(RETRYING),
        Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
    end

    def serve
      server = Puma::Server.new(JobQueue::Web.new(session_secret: "bench" * 13), Puma::Events.null, min_threads: 1, max_threads: 2)
      port = server.add_tcp_listener("127.0.0.1", 0).addr[1]
      server.run
      [port, server]
    end

    def pages(client)
      middle_queue = QUEUED / 2 / 25
      middle_retry = RETRYING / 2 / 25
      json, score = client.zrange("retry", RETRYING / 2, RETRYING / 2, with_scores: true).first
      entry = "#{score}-#{JSON.parse(json)["jid"]}"
      {
        "dashboard" => "/",
        "dashboard, 90 days" => "/?days=90",
        "queues" => "/queues",
        "queue, first page" => "/queues/big",
        "queue, middle page" => "/queues/big?page=#{middle_queue}",
        "queue, last page" => "/queues/big?page=#{QUEUED / 25}",
        "retries, first page" => "/retries",
        "retries, middle page (100 per page)" => "/retries?per=100&page=#{middle_retry / 4}",
        "retries, search (one window)" => "/retries?q=Rare",
        "retry entry" => "/retries/#{entry}",
        "scheduled" => "/scheduled",
        "dead" => "/dead",
        "busy" => "/busy",
        "ordered" => "/ordered",
        "dedup, first step" => "/dedup",
        "dedup, 1,000 keys a step" => "/dedup?count=1000",
        "api: dedup" => "/api/v1/dedup",
        "api: /api/v1/stats" => "/api/v1/stats",
        "api: dashboard" => "/api/v1/dashboard",
        "api: retries page" => "/api/v1/retries?page=#{middle_retry}"
      }
    end

    # Milliseconds of each request, after a warm-up, over one keep-alive connection.
    def measure(port, path)
      Net::HTTP.start("127.0.0.1", port) do |http|
        WARMUP.times { fetch(http, path) }
        Array.new(REQUESTS) do
          t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          fetch(http, path)
          (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1000
        end
      end
    end

    def fetch(http, path)
      response = http.get(path)
      raise "#{path}: HTTP #{response.code}" unless response.code == "200"
    end

    def report(timings, redis_version, load_before, load_after)
      rows = timings.map do |label, ms|
        p99 = Report.percentile(ms, 99)
        [label, Report.num(Report.median(ms), 1), Report.num(p99, 1), p99 <= GOAL_MS ? "ok" : "SLOW"]
      end
      puts "Dashboard pages: #{Report.num(QUEUED)} jobs in a queue, #{Report.num(RETRYING)} in retry, #{Report.num(HELD)} idempotency keys held; #{REQUESTS} requests each over HTTP (Puma)"
      puts Report.table(["page", "p50 ms", "p99 ms", ""], rows)
      worst = timings.map { |_, ms| Report.percentile(ms, 99) }.max
      puts Report.target("every page's p99 <= #{GOAL_MS.round} ms", worst <= GOAL_MS, "worst #{Report.num(worst, 1)} ms")
      puts Report.load_line(load_before, load_after)
      path = Report.write_json("web", {"queued" => QUEUED, "retrying" => RETRYING, "held" => HELD, "requests" => REQUESTS,
        "pages" => timings.to_h { |label, ms| [label, {"p50_ms" => Report.median(ms), "p99_ms" => Report.percentile(ms, 99)}] },
        "machine" => {"cores" => Cpu.cores, "ruby" => RUBY_DESCRIPTION, "redis_server" => redis_version, "queue" => JobQueue::VERSION}})
      puts "results: #{path}"
    end
  end
end

Bench::Web.run if $PROGRAM_NAME == __FILE__
