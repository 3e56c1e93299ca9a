# frozen_string_literal: true

module JobQueue
  # Pushes jobs in Sidekiq's format.
  #
  #   JobQueue::Client.push("class" => HardWorker, "args" => [1, "two"])
  #   JobQueue::Client.push_bulk("class" => HardWorker, "args" => [[1], [2], [3]])
  #
  # A job with "at" (epoch seconds) in the future goes to the schedule; otherwise it is enqueued at
  # once. Client middleware runs for every job and may change it, or stop it by not yielding.
  class Client
    def self.push(item)
      new.push(item)
    end

    def self.push_bulk(items)
      new.push_bulk(items)
    end

    def initialize(config = JobQueue.config)
      @config = config
    end

    # Returns the job's jid, or nil if a middleware stopped it.
    def push(item)
      job = normalize(item)
      job = run_middleware(job) or return nil
      write([job])
      job["jid"]
    end

    # `items` holds "class", "args" (an Array of argument Arrays), and optionally "at" (one time, or
    # one per job) and any job option. Returns the jids of the jobs pushed.
    def push_bulk(items)
      items = stringify(items)
      args_list = items.delete("args")
      raise ArgumentError, "push_bulk needs \"args\" as an Array of Arrays" unless args_list.is_a?(Array) && args_list.all?(Array)

      ats = items.delete("at")
      if ats.is_a?(Array) && ats.size != args_list.size
        raise ArgumentError, "push_bulk: \"at\" has #{ats.size} times for #{args_list.size} jobs"
      end

      jobs = args_list.each_with_index.filter_map do |args, i|
        at = ats.is_a?(Array) ? ats[i] : ats
        job = normalize(items.merge("args" => args, "at" => at).compact)
        run_middleware(job)
      end
      write(jobs)
      jobs.map { |j| j["jid"] }
    end

    private

    def normalize(item)
      item = stringify(item)
      klass = item["class"]
      raise ArgumentError, "job needs a \"class\" (a worker class or its name): #{item.inspect[0, 200]}" unless klass.is_a?(Class) || (klass.is_a?(String) && !klass.empty?)
      raise ArgumentError, "job \"args\" must be an Array: #{item.inspect[0, 200]}" unless item["args"].is_a?(Array)

      defaults = klass.respond_to?(:get_sidekiq_options) ? klass.get_sidekiq_options : @config.default_job_options
      job = defaults.merge(item)
      job["class"] = klass.to_s
      job["queue"] = job["queue"].to_s
      raise ArgumentError, "job needs a queue name" if job["queue"].empty?

      JsonArgs.check!(job["args"], job["class"])
      job["jid"] ||= SecureRandom.hex(12)
      job["created_at"] ||= Time.now.to_f
      normalize_at(job)
    end

    # An "at" that is not in the future means "now", as in Sidekiq.
    def normalize_at(job)
      return job unless job.key?("at")

      at = job["at"]
      raise ArgumentError, "job \"at\" must be a Numeric epoch time, got #{at.inspect}" unless at.is_a?(Numeric)

      job.delete("at") if at <= Time.now.to_f
      job
    end

    def run_middleware(job)
      return job if @config.client_middleware_chain.empty?

      pushed = nil
      worker_class = job["class"]
      @config.client_middleware_chain.invoke(worker_class, job, job["queue"], nil) { pushed = job }
      pushed
    end

    def write(jobs)
      return if jobs.empty?

      engine = @config.engine
      scheduled, now = jobs.partition { |j| j.key?("at") }
      scheduled.each_slice(1000) do |slice|
        engine.schedule(slice.map { |j| at = j.delete("at"); [at.to_f, JSON.generate(j)] })
      end
      enqueued_at = Time.now.to_f
      now.group_by { |j| j["queue"] }.each do |queue, group|
        group.each_slice(1000) do |slice|
          engine.push(queue, slice.map { |j| j["enqueued_at"] = enqueued_at; JSON.generate(j) })
        end
      end
    end

    def stringify(hash)
      raise ArgumentError, "job must be a Hash, got #{hash.class}" unless hash.is_a?(Hash)

      hash.transform_keys(&:to_s)
    end
  end
end
