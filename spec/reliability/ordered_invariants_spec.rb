# frozen_string_literal: true

require_relative "support"
require_relative "ordered_invariant_checker"

# Acceptance 2 of issue #6: the guarantees of ordered jobs hold across two server processes, random
# failures, retries, the morgue, a kill -9 and a restart.
#
# 2,000 ids × 10 versions (score = version) are pushed in a random interleaving, in chunks, while two
# `exe/queue -c 5` processes run them (spec/apps/ordered_invariants.rb records every run). Within a
# chunk the rows are shuffled, so one perform_async may carry an id's versions in any order; across
# chunks an id's versions only grow, so "seen in non-decreasing score order across runs" is a property
# the servers must keep, not one the pushes could break. A chunk is pushed whenever fewer than
# `backlog` ids are queued, so new versions keep merging into queued and failed ones. The second
# process starts beside the first, so shards change hands under load; half-way, the first is killed
# with SIGKILL and restarted (its successor joins under load too); its shards must be taken over
# within 30 s.
RSpec.describe "ordered jobs under failures, kill -9 and restart" do
  include_context "with server processes"

  let(:ids) { (1..2_000).map { |i| "id-#{i}" } }
  let(:versions) { 10 }
  let(:chunks) { 100 }
  let(:backlog) { 400 }
  let(:worker) { OrderedInvariantWorker }

  before do
    load File.join(ServerProcess::APPS, "ordered_invariants.rb")
    ordered_workers_made << OrderedInvariantWorker
  end

  def key(suffix) = lowkiq_key(worker, suffix)

  def leases = redis.hgetall("jq:ordered:#{worker.queue_name}:leases")

  def runs_by(pid) = redis.hget(OrderedInvariantWorker::BY_PID, pid.to_s).to_i

  # Every (id, version), in a random interleaving where each id's versions come in increasing order,
  # cut into chunks whose rows are shuffled.
  def push_chunks
    stream = ids.flat_map { |id| [id] * versions }.shuffle
    counts = Hash.new(0)
    rows = stream.map { |id| {id: id, payload: {"v" => counts[id] += 1}, score: counts[id]} }
    rows.each_slice(rows.size / chunks).map(&:shuffle)
  end

  # Ids queued in every shard but `except`.
  def queued(except: nil)
    shards = (0...worker.shards_count).map(&:to_s) - Array(except)
    shards.sum { |s| redis.zcard(key("ids_scored_by_perform_in:#{s}")) }
  end

  def in_flight(shards) = shards.sum { |s| redis.hlen(key("processing:ids_with_perform_in:#{s}")) }

  def drained?
    redis.zcard(key("all_ids_lex")).zero? && redis.hvals(key("processing_length_by_shard")).all? { |n| n.to_i.zero? } &&
      redis.keys(key("processing:*")).empty?
  end

  # {id => [versions]} in the morgue.
  def morgue
    JobQueue::Ordered.morgue(worker, limit: ids.size).to_h { |entry| [entry[:id], entry[:payloads].map { |payload, _| payload["v"] }] }
  end

  it "never runs an id twice at once, keeps each id's versions in order, loses none, and takes a killed process's shards over within 30 s" do
    started = monotonic
    # The second process joins while the first already runs: shards change hands under load.
    running = Array.new(2) { start_server("ordered_invariants.rb", "-c", "5") }
    identities = running.map { |s| identity_of(s) }

    kill = nil
    takeover = nil
    push_chunks.each_with_index do |chunk, i|
      # The killed process's shards stall until taken over; pushes go on at the pace of the others.
      wait_until("fewer than #{backlog} ids queued", timeout: 60) { queued(except: kill&.fetch(:shards)) < backlog }
      worker.perform_async(chunk)
      if i == chunks * 2 / 5
        wait_until("both processes to hold shards") { leases.size == worker.shards_count && leases.values.uniq.size == 2 }
      end
      next unless i == chunks / 2

      victim = running.first
      held = leases.select { |_, who| who == identities.first }.keys
      wait_until("the victim to be running batches") { runs_by(victim.pid) >= 100 && in_flight(held) >= 3 }
      victim.kill!
      kill = {pid: victim.pid, at: monotonic, shards: held, orphaned: in_flight(held), ran: runs_by(victim.pid)}
      running << start_server("ordered_invariants.rb", "-c", "5")
      takeover = Thread.new do
        wait_until("the killed process's shards to change owner", timeout: 30) do
          now = leases
          held.all? { |s| now[s] && now[s] != identities.first }
        end
        monotonic - kill[:at]
      end
    end
    taken_over_after = takeover.value

    wait_until("every id to be processed or in the morgue, nothing in processing", timeout: 60) { drained? }
    statuses = running.drop(1).map(&:stop)
    elapsed = monotonic - started

    records = redis.lrange(OrderedInvariantWorker::RUNS, 0, -1).map { |raw| JSON.parse(raw) }
    dead = morgue
    check = OrderedInvariantChecker.new(records, ids: ids, versions: versions, morgue: dead,
      killed_pid: kill[:pid], killed_at: kill[:at]).check
    exhausted = redis.lrange(OrderedInvariantWorker::EXHAUSTED, 0, -1).map { |raw| JSON.parse(raw) }
    report(format(
      "ordered invariants: %d ids × %d versions, 2 processes × 5 threads, batch %d; %d runs (%d failed), " \
      "kill -9 after the victim ran %d batches (%d ids in flight on its %d shards), shards taken over %.1f s after the kill, " \
      "%d rerun(s), %d version(s) in the morgue, violations %d, %.1f s",
      ids.size, versions, worker.batch_size, check.runs.size, check.failed_runs, kill[:ran], kill[:orphaned], kill[:shards].size,
      taken_over_after, check.reruns, dead.values.sum(&:size), check.violations.values.sum(&:size), elapsed
    ))

    expect(check.violations.values.sum(&:size)).to eq(0), check.summary
    expect(kill[:orphaned]).to be > 0
    expect(taken_over_after).to be <= 30
    # Reruns are the kill's: at most one batch per thread of the killed process.
    expect(check.reruns).to be <= 5 * worker.batch_size
    expect(check.failed_runs).to be > 0
    expect(dead).not_to be_empty
    expect(exhausted.map { |e| [e["id"], e["v"]] }.uniq - dead.flat_map { |id, vs| vs.map { |v| [id, [v]] } }).to be_empty
    expect(statuses.map(&:exitstatus)).to eq([0, 0])
    expect(JobQueue::Ordered.stats([worker]).dig("total", "length")).to eq(0)
    expect(redis.keys(key("processing:*"))).to be_empty
    expect(leases).to be_empty # released by the clean stops; the victim's were taken over
  end
end
