# frozen_string_literal: true

module JobQueue
  # The jobs being run now by every live process (Sidekiq's `Workers`/`WorkSet`): yields
  # `[process_identity, thread_id, {"queue", "run_at", "payload" => job Hash}]`, oldest first.
  class WorkSet
    include Enumerable

    def each(&block)
      return to_enum(:each) unless block

      works = API.shards.flat_map do |shard|
        API.engine(shard).api_work.map do |identity, thread, json|
          work = JSON.parse(json)
          work["payload"] = JSON.parse(work["payload"]) if work["payload"].is_a?(String)
          work["shard"] = shard if JobQueue.config.shards.many?
          [identity, thread, work]
        end
      end
      works.sort_by { |(_, _, work)| work["run_at"].to_f }.each(&block)
    end

    # Jobs running now, as the processes' last beats counted them.
    def size = API.shards.sum { |shard| API.engine(shard).api_processes.sum { |row| row[2] } }
  end

  Workers = WorkSet
end
