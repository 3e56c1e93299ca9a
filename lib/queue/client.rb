# frozen_string_literal: true

module JobQueue
  # Pushes jobs in Sidekiq's format.
  #
  #   JobQueue::Client.push("class" => HardWorker, "args" => [1, "two"])
  #   JobQueue::Client.push_bulk("class" => HardWorker, "args" => [[1], [2], [3]])
  #
  # A job with "at" (epoch seconds) in the future goes to the schedule; otherwise it is enqueued at
  # once. Client middleware runs for every job and may change it, or stop it by not yielding. Every
  # call is one round trip to Redis (bulk pushes: one per 1,000 jobs).
  class Client
    BULK_SLICE = 1000

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
      raise ArgumentError, "job must be a Hash, got #{item.class}" unless item.is_a?(Hash)

      job = normalize(item)
      job = run_middleware(worker_class_of(item), job) or return nil
      engine = @config.engine
      if job.key?("at")
        at = job.delete("at")
        engine.schedule([[at.to_f, JSON.generate(job)]])
      else
        job["enqueued_at"] = Time.now.to_f
        engine.push(job["queue"], [JSON.generate(job)])
      end
      job["jid"]
    end

    # `items` holds "class", "args" (an Array of argument Arrays), and optionally "at" (one time, or
    # one per job) and any job option. The options are checked once; each job gets its own jid.
    # Returns the jids of the jobs pushed.
    def push_bulk(items)
      items = stringify(items)
      args_list = items.delete("args")
      raise ArgumentError, "push_bulk needs \"args\" as an Array of Arrays" unless args_list.is_a?(Array) && args_list.all?(Array)
      raise ArgumentError, "push_bulk cannot take one \"jid\" for many jobs" if items.key?("jid") && args_list.size > 1

      ats = items.delete("at")
      if ats.is_a?(Array) && ats.size != args_list.size
        raise ArgumentError, "push_bulk: \"at\" has #{ats.size} times for #{args_list.size} jobs"
      end

      worker_class = items["class"]
      base = normalize(items.merge("args" => []))
      base.delete("jid") unless items.key?("jid")
      now = Time.now.to_f
      jobs = args_list.each_with_index.filter_map do |args, i|
        JsonArgs.check!(args, base["class"])
        job = base.merge("args" => args)
        job["jid"] ||= SecureRandom.hex(12)
        at = ats.is_a?(Array) ? ats[i] : ats
        job["at"] = at if check_at(at) && at > now
        run_middleware(worker_class, job)
      end
      write(jobs)
      jobs.map { |j| j["jid"] }
    end

    private

    # The job hash as it is stored: the worker's options under the caller's, class and queue as
    # strings, a jid and created_at. Arguments are checked to be JSON-native.
    def normalize(item)
      klass = item["class"] || item[:class]
      unless klass.is_a?(Class) || (klass.is_a?(String) && !klass.empty?)
        raise ArgumentError, "job needs a \"class\" (a worker class or its name): #{item.inspect[0, 200]}"
      end

      job = (klass.respond_to?(:get_sidekiq_options) ? klass.get_sidekiq_options : @config.default_job_options).dup
      item.each { |key, value| job[key.to_s] = value }
      raise ArgumentError, "job \"args\" must be an Array: #{item.inspect[0, 200]}" unless job["args"].is_a?(Array)

      job["class"] = klass.is_a?(Class) ? class_name(klass) : klass
      job["queue"] = job["queue"].to_s
      raise ArgumentError, "job needs a queue name" if job["queue"].empty?

      JsonArgs.check!(job["args"], job["class"])
      job["jid"] ||= SecureRandom.hex(12)
      job["created_at"] ||= Time.now.to_f
      job.delete("at") if job.key?("at") && !(check_at(job["at"]) && job["at"] > Time.now.to_f)
      job
    end

    # A server finds the worker by this name, so an anonymous class cannot be enqueued.
    def class_name(klass)
      klass.name or raise ArgumentError, "an anonymous class cannot be enqueued: a server could not find it by name"
    end

    # "at" must be a number (epoch seconds) or absent; one that is not in the future means "now",
    # as in Sidekiq.
    def check_at(at)
      return false if at.nil?
      raise ArgumentError, "job \"at\" must be a Numeric epoch time, got #{at.inspect}" unless at.is_a?(Numeric)

      true
    end

    # Middleware gets the worker class as the caller gave it (a Class from `perform_async`, or a
    # String), as Sidekiq passes it.
    def run_middleware(worker_class, job)
      return job if @config.client_middleware_chain.empty?

      pushed = nil
      @config.client_middleware_chain.invoke(worker_class, job, job["queue"], nil) { pushed = job }
      pushed
    end

    def worker_class_of(item)
      item.key?("class") ? item["class"] : item[:class]
    end

    def write(jobs)
      return if jobs.empty?

      engine = @config.engine
      scheduled, now = jobs.partition { |j| j.key?("at") }
      scheduled.each_slice(BULK_SLICE) do |slice|
        engine.schedule(slice.map { |j| [j.delete("at").to_f, JSON.generate(j)] })
      end
      enqueued_at = Time.now.to_f
      now.group_by { |j| j["queue"] }.each do |queue, group|
        group.each_slice(BULK_SLICE) do |slice|
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
