# frozen_string_literal: true

module JobQueue
  # The worker context, as GitLab's ApplicationContext keeps it: metadata about who and what a piece of
  # work is for, written into every job enqueued while it is set (as `meta.*` fields of the job hash),
  # and restored while that job runs, so it travels on to the jobs the job enqueues.
  #
  #   JobQueue::Context.with(user: current_user, project: project) do
  #     NotifyWorker.perform_async(id)          # job hash gets "meta.user", "meta.project", ...
  #   end
  #
  #   JobQueue::Context.current  # => {"meta.user" => "alice", "meta.project" => "group/app", ...} (frozen)
  #
  # Objects become strings: a user by its `username`, a project or namespace by its `full_path`
  # (`meta.root_namespace` is the first segment of that path), anything else by `to_s`. A key given
  # nil removes it from the context.
  module Context
    PREFIX = "meta."
    # What a job's JSON holds when it may carry a context: a key starting with PREFIX, written out or
    # with a \u escape in it (Context.in_json?).
    MARK = "\"#{PREFIX}".freeze
    ESCAPE = "\\u"
    # What `with` takes, and the `meta.*` key each fills.
    KEYS = {
      user: "meta.user",
      project: "meta.project",
      root_namespace: "meta.root_namespace",
      caller_id: "meta.caller_id",
      root_caller_id: "meta.root_caller_id",
      remote_ip: "meta.remote_ip",
      client_id: "meta.client_id",
      feature_category: "meta.feature_category",
      related_class: "meta.related_class"
    }.freeze
    # Given instead of root_namespace, a namespace (or group) object or path.
    NAMESPACE = :namespace
    EMPTY = {}.freeze
    THREAD_KEY = :job_queue_context

    class << self
      # The context of the running code: a frozen Hash of "meta.*" keys to Strings (empty when none).
      def current
        Thread.current[THREAD_KEY] || EMPTY
      end

      # Runs the block with `attributes` merged over the current context; restores it afterwards.
      def with(attributes = {})
        previous = Thread.current[THREAD_KEY]
        Thread.current[THREAD_KEY] = merge(current, attributes)
        yield
      ensure
        Thread.current[THREAD_KEY] = previous
      end

      # The "meta.*" Hash for `attributes` merged over `base` (frozen). Raises ArgumentError on an
      # unknown attribute.
      def merge(base, attributes)
        meta = base.dup
        attributes.each do |key, value|
          key = key.to_sym
          if key == NAMESPACE || key == :root_namespace
            set(meta, KEYS[:root_namespace], value && root_of(value))
          elsif key == :project
            set(meta, KEYS[:project], value && path_of(value))
            set(meta, KEYS[:root_namespace], value && root_of(value)) unless attributes.key?(NAMESPACE) || attributes.key?(:root_namespace)
          elsif key == :user
            set(meta, KEYS[:user], value && user_name(value))
          elsif KEYS.key?(key)
            set(meta, KEYS[key], value&.to_s)
          else
            raise ArgumentError, "unknown context attribute #{key.inspect}; known: #{(KEYS.keys + [NAMESPACE]).join(", ")}"
          end
        end
        meta.freeze
      end

      # Whether a job's JSON may carry a context ("meta.*" keys): when not, a server restores none
      # without looking at each key of the parsed job (`restore`'s `scan`). Two substring searches.
      # @api private
      def in_json?(raw)
        raw.include?(MARK) || raw.include?(ESCAPE)
      end

      # The context stored in a job hash (its "meta.*" fields), or nil when it has none.
      def from_job(job)
        meta = nil
        job.each do |key, value|
          next unless key.start_with?(PREFIX)

          (meta ||= {})[key] = value
        end
        meta&.freeze
      end

      # Runs the block with the context a job carries (and nothing else); restores the previous one.
      # Allocates nothing for a job without context. `scan`: false when the job is known to carry
      # none (`in_json?`), so its keys are not looked at.
      def restore(job, scan = true)
        previous = Thread.current[THREAD_KEY]
        meta = scan ? from_job(job) : nil
        return yield if meta.nil? && previous.nil?

        Thread.current[THREAD_KEY] = meta
        begin
          yield
        ensure
          Thread.current[THREAD_KEY] = previous
        end
      end

      # Writes the context a job enqueued now gets into its hash: the current context (or, for a worker
      # class that decides its own, what its `job_context` returns; a class given by name is looked up),
      # without overwriting "meta.*" fields the caller set. Called by the client for every job.
      # @api private
      def stamp(job, worker_class)
        worker_class = loaded_class(worker_class) if worker_class.is_a?(String)
        meta = worker_class.respond_to?(:job_context) ? worker_class.job_context(job["args"]) : Thread.current[THREAD_KEY]
        meta&.each { |key, value| job[key] = value unless job.key?(key) }
        job
      end

      private

      def loaded_class(name)
        Object.const_get(name)
      rescue NameError
        nil
      end

      def set(meta, key, value)
        value.nil? ? meta.delete(key) : meta[key] = value
      end

      def user_name(user)
        user.respond_to?(:username) ? user.username.to_s : user.to_s
      end

      def path_of(object)
        object.respond_to?(:full_path) ? object.full_path.to_s : object.to_s
      end

      def root_of(object)
        path_of(object).split("/").first
      end
    end
  end
end
