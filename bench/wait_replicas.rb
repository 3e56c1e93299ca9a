#!/usr/bin/env ruby
# frozen_string_literal: true

# The cost of `config.redis[:wait_replicas] = 1` for one-by-one pushes: a primary and a replica
# (redis-servers of the benchmark's own, over TCP), and M `perform_async` calls from one thread with
# the option off and on, in paired rounds whose order alternates; prints each round and the medians
# (pushes/s, and the primary's and the replica's CPU per push).
#
#   ruby bench/wait_replicas.rb          # M=10000, ROUNDS=3
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "redis"
require_relative "lib/redis_server"
require "queue"

M = Integer(ENV.fetch("M", "10000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))

class WaitBenchWorker
  include JobQueue::Worker
end

def cpu(client)
  info = client.info("cpu")
  info.fetch("used_cpu_sys").to_f + info.fetch("used_cpu_user").to_f
end

primary = Bench::RedisServer.new.start
replica = Bench::RedisServer.new.start
begin
  port = Integer(primary.tcp_url[/\d+\z/])
  replica.client.call("replicaof", "127.0.0.1", port)
  sleep 0.02 until replica.client.info("replication")["master_link_status"] == "up"
  configs = {"off" => {url: primary.tcp_url}, "wait_replicas: 1" => {url: primary.tcp_url, wait_replicas: 1}}
  rounds = (1..ROUNDS).map do |round|
    order = round.odd? ? configs.to_a : configs.to_a.reverse
    order.to_h do |name, options|
      JobQueue.configure { |c| c.redis = options }
      WaitBenchWorker.perform_async(0) # dials, warms up
      cpus = [cpu(primary.client), cpu(replica.client)]
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      M.times { |i| WaitBenchWorker.perform_async(i) }
      seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      primary_us, replica_us = [cpu(primary.client), cpu(replica.client)].zip(cpus).map { |now, before| (now - before) * 1e6 / M }
      primary.client.flushall
      row = [M / seconds, primary_us, replica_us]
      puts format("%d: %-16s %8.0f pushes/s  primary CPU %5.1f µs/push  replica CPU %5.1f µs/push", round, name, *row)
      [name, row]
    end
  end
  median = ->(values) { values.sort[values.size / 2] }
  configs.each_key do |name|
    rows = rounds.map { |r| r.fetch(name) }
    puts format("median %-16s %8.0f pushes/s  primary CPU %5.1f µs/push  replica CPU %5.1f µs/push", name, *rows.transpose.map(&median))
  end
  off, on = configs.keys.map { |name| median.call(rounds.map { |r| r.fetch(name)[0] }) }
  puts format("wait_replicas: 1 runs at %.2f× the rate of off (load average %s)", on / off, File.read("/proc/loadavg").split.first(3).join(" "))
ensure
  primary&.stop
  replica&.stop
end
