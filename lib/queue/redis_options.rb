# frozen_string_literal: true

require "uri"

module JobQueue
  # The options of `config.redis = {...}` that Sidekiq 6.4 takes, read the way redis-rb reads them: a
  # URL (`url:`, else REDIS_URL, else redis://127.0.0.1:6379/0) whose parts `host:`, `port:`, `db:`,
  # `password:` and `path:` (a unix socket) override, `ssl: true` or rediss:// for TLS.
  #
  # Two readers: the engine gets one URL (#engine_url), and JobQueue.redis's connections get redis-rb
  # options (#client_options) plus a pool size and checkout timeout. What the engine cannot use is
  # named by #ignored_by_engine, for a warning.
  #
  # Redis Sentinel, as redis-rb 4.x and Sidekiq take it: `sentinels:` (each `{host:, port:}`, or a
  # "host:port" / "redis://host:port" String), the master's name from `name:` or else the URL's host
  # (redis://mymaster/0), `role: :master` (the only role: a job queue writes), `sentinel_password:`
  # and `sentinel_username:` for the sentinels themselves; the URL's password and db are the master's.
  # The engine asks the sentinels before every dial (#engine_sentinel); redis-rb does its own.
  #
  # Beyond Sidekiq: `wait_replicas: N` makes every push return only once N replicas acknowledged it
  # (Redis's WAIT, after at most `wait_timeout:` ms, 1000 unless given); fewer raises
  # JobQueue::ReplicationError and the push is not sent again (#engine_wait).
  class RedisOptions
    DEFAULT_URL = "redis://127.0.0.1:6379/0"
    SENTINEL_KEYS = %i[sentinels name role sentinel_password sentinel_username].freeze
    # redis-client's names (Sidekiq 7's `config.redis`) for what JobQueue.redis's connections take.
    CLIENT_TIMEOUT_KEYS = %i[timeout connect_timeout read_timeout write_timeout].freeze
    WAIT_KEYS = %i[wait_replicas wait_timeout].freeze
    KEYS = (%i[url password namespace host port db path ssl ssl_params size network_timeout pool_timeout reconnect_attempts] +
      CLIENT_TIMEOUT_KEYS + SENTINEL_KEYS + WAIT_KEYS).freeze
    # Milliseconds a push waits for its replicas unless `wait_timeout:` says.
    DEFAULT_WAIT_TIMEOUT = 1000
    SENTINEL_ENTRY_KEYS = %i[host port username password].freeze
    # The TLS parameters the engine honours: verify_mode (VERIFY_NONE becomes the URL's #insecure) and
    # ca_file (the CA certificates it trusts instead of the system's).
    ENGINE_SSL_PARAMS = %i[verify_mode ca_file].freeze
    OVERRIDES = %i[host port db path ssl].freeze

    attr_reader :options

    def initialize(options)
      raise ArgumentError, "redis options must be a Hash, got #{options.inspect}" unless options.is_a?(Hash)

      @options = options.transform_keys(&:to_sym)
      unknown = @options.keys - KEYS
      raise ArgumentError, "unknown redis option(s) #{unknown.join(", ")}; use #{KEYS.map { |k| "#{k}:" }.join(", ")}" if unknown.any?

      validate!
    end

    # The URL the engine dials: the given one unchanged unless an option overrides part of it, with
    # `password:` in its userinfo (in the `pass` query parameter of a unix:// URL, the only place a
    # socket URL has for it), and `#insecure` when ssl_params turn verification off.
    def engine_url
      url = (sentinel? || OVERRIDES.any? { |key| @options.key?(key) }) ? overridden_url : base_url
      url = with_password(url, @options[:password]) unless @options[:password].nil?
      insecure? ? "#{url}#insecure" : url
    end

    # ssl_params ca_file, for a TLS URL: the PEM file of CA certificates the engine trusts instead of
    # the system's. nil when not given (or not TLS).
    def engine_ca_file
      params = @options[:ssl_params] or return nil
      file = params[:ca_file] || params["ca_file"]
      file && engine_scheme_tls? ? file.to_s : nil
    end

    # Keyword options for Redis.new (redis-rb), which applies the same overrides to the same URL.
    # redis-rb 4.x takes the master's name as the host, and each sentinel's password in its own Hash.
    def client_options
      client = {url: base_url}
      %i[host port db path password ssl ssl_params].each { |key| client[key] = @options[key] if @options.key?(key) }
      client[:timeout] = @options[:network_timeout] if @options.key?(:network_timeout)
      (CLIENT_TIMEOUT_KEYS + [:reconnect_attempts]).each { |key| client[key] = @options[key] if @options.key?(key) }
      if sentinel?
        client[:host] = master_name
        client[:role] = :master
        client[:sentinels] = sentinel_entries.map do |entry|
          entry = entry.dup
          entry[:password] ||= @options[:sentinel_password] if @options.key?(:sentinel_password)
          entry[:username] ||= @options[:sentinel_username] if @options.key?(:sentinel_username)
          entry
        end
      end
      client
    end

    def sentinel?
      @options.key?(:sentinels)
    end

    # What the engine needs to find the master through the sentinels, nil without sentinels:
    # [name, [[host, port], ...], username, password].
    def engine_sentinel
      return nil unless sentinel?

      entries = sentinel_entries
      [master_name, entries.map { |e| [e[:host], e[:port]] }, sentinel_credential(entries, :username), sentinel_credential(entries, :password)]
    end

    # [replicas, timeout_ms] for the engine's pushes to WAIT for, nil when wait_replicas: is not given.
    def engine_wait
      replicas = @options[:wait_replicas] or return nil

      [replicas, @options.fetch(:wait_timeout, DEFAULT_WAIT_TIMEOUT)]
    end

    # The name the sentinels know the master by: name:, else host:, else the URL's host.
    def master_name
      name = @options[:name] || @options[:host] || url_host
      name.to_s
    end

    # Connections in JobQueue.redis's pool: `size:`, else Sidekiq's default (concurrency + 5 in a
    # server, 5 elsewhere).
    def pool_size(concurrency, server)
      @options[:size] || (server ? concurrency + 5 : 5)
    end

    # Seconds JobQueue.redis waits for a free connection (Sidekiq's default: 1).
    def pool_timeout
      @options[:pool_timeout] || 1
    end

    # One sentence per option the engine does not use (JobQueue.redis's connections still do).
    def ignored_by_engine
      ignored = []
      (CLIENT_TIMEOUT_KEYS + [:reconnect_attempts]).select { |key| @options.key?(key) }.each do |key|
        ignored << "redis option #{key}: applies to JobQueue.redis connections only; " \
          "the engine dials with a 2 s timeout, waits up to 30 s for a reply and redials by itself"
      end
      if @options.key?(:network_timeout)
        ignored << "redis option network_timeout: applies to JobQueue.redis connections only; " \
          "the engine dials with a 2 s timeout and waits up to 30 s for a reply"
      end
      ssl = (@options[:ssl_params] || {}).keys.map(&:to_sym) - ENGINE_SSL_PARAMS
      if ssl.any?
        ignored << "redis ssl_params #{ssl.join(", ")}: applies to JobQueue.redis connections only; " \
          "the engine trusts ssl_params ca_file, else the system's CA certificates (or the file SSL_CERT_FILE names), and sends no client certificate"
      end
      ignored
    end

    private

    def base_url
      @options[:url] || ENV["REDIS_URL"] || DEFAULT_URL
    end

    def validate!
      validate_sentinel!
      check(:host) { |v| v.is_a?(String) && !v.empty? }
      check(:port) { |v| v.is_a?(Integer) && v.between?(1, 65_535) }
      check(:db) { |v| v.is_a?(Integer) && v >= 0 }
      check(:path) { |v| v.is_a?(String) && !v.empty? }
      check(:ssl) { |v| v == true || v == false }
      check(:ssl_params) { |v| v.is_a?(Hash) }
      check(:size) { |v| v.is_a?(Integer) && v.positive? }
      check(:network_timeout) { |v| v.is_a?(Numeric) && v.positive? }
      check(:pool_timeout) { |v| v.is_a?(Numeric) && v.positive? }
      CLIENT_TIMEOUT_KEYS.each { |key| check(key) { |v| v.is_a?(Numeric) && v.positive? } }
      check(:reconnect_attempts) { |v| v.is_a?(Integer) && v >= 0 }
      validate_wait!
    end

    def validate_wait!
      if @options.key?(:wait_replicas) && !(@options[:wait_replicas].is_a?(Integer) && @options[:wait_replicas].between?(1, 2**31))
        raise ArgumentError, "invalid redis option wait_replicas: #{@options[:wait_replicas].inspect}; give how many replicas must acknowledge each push (1 or more), or leave it out"
      end
      return unless @options.key?(:wait_timeout)

      raise ArgumentError, "redis option wait_timeout: needs wait_replicas:" unless @options.key?(:wait_replicas)
      return if @options[:wait_timeout].is_a?(Integer) && @options[:wait_timeout].between?(1, 2**40)

      raise ArgumentError, "invalid redis option wait_timeout: #{@options[:wait_timeout].inspect}; give milliseconds (an Integer of 1 or more)"
    end

    def check(key)
      return unless @options.key?(key)
      return if yield(@options[key])

      raise ArgumentError, "invalid redis option #{key}: #{@options[key].inspect}"
    end

    def validate_sentinel!
      unless sentinel?
        given = SENTINEL_KEYS & @options.keys
        raise ArgumentError, "redis option(s) #{given.join(", ")} need sentinels: [{host:, port:}, ...] (Redis Sentinel)" if given.any?

        return
      end
      check(:name) { |v| (v.is_a?(String) || v.is_a?(Symbol)) && !v.to_s.empty? }
      check(:sentinel_password) { |v| v.nil? || v.is_a?(String) } # nil: none (ENV["SENTINEL_PASSWORD"] unset)
      check(:sentinel_username) { |v| v.nil? || (v.is_a?(String) && !v.empty?) }
      validate_role!
      if @options.key?(:path) || base_url.match?(/\A(redis\+)?unix:/)
        raise ArgumentError, "redis option sentinels: needs a redis:// or rediss:// URL whose host names the master (redis://mymaster/0), not a unix socket"
      end
      entries = sentinel_entries
      sentinel_credential(entries, :username)
      sentinel_credential(entries, :password)
      raise ArgumentError, "redis option sentinels: needs the master's name: name: \"mymaster\", or the URL's host (redis://mymaster/0)" if master_name.empty?
    end

    def validate_role!
      return unless @options.key?(:role)

      role = @options[:role].to_s
      return if role == "master"

      if %w[replica slave].include?(role)
        raise ArgumentError, "redis option role: #{@options[:role].inspect} is not supported: queue pushes, fetches and acknowledges jobs, which needs the master; use role: :master (the default)"
      end
      raise ArgumentError, "invalid redis option role: #{@options[:role].inspect}; the only role is :master"
    end

    # Each sentinel as {host:, port:} (and its own username:/password: if given), from the forms
    # redis-rb takes: a Hash (Symbol or String keys), or a "host:port" / "redis://host:port" String.
    def sentinel_entries
      list = @options[:sentinels]
      unless list.is_a?(Array) && !list.empty?
        raise ArgumentError, "invalid redis option sentinels: #{list.inspect}; give an Array of {host:, port:} (or \"host:port\")"
      end

      list.map { |entry| sentinel_entry(entry) }
    end

    def sentinel_entry(entry)
      hash =
        case entry
        when Hash then entry.transform_keys { |k| k.to_s.delete_prefix(":").to_sym }
        when String then sentinel_from_string(entry)
        else raise ArgumentError, "invalid sentinel #{entry.inspect} in redis option sentinels:; give {host:, port:} or \"host:port\""
        end
      unknown = hash.keys - SENTINEL_ENTRY_KEYS
      raise ArgumentError, "unknown key(s) #{unknown.join(", ")} in sentinel #{entry.inspect}; use host:, port: (username:, password:)" if unknown.any?

      host = hash[:host]
      port = hash[:port] || 26_379
      port = Integer(port, exception: false) if port.is_a?(String)
      raise ArgumentError, "sentinel #{entry.inspect} in redis option sentinels: needs a host" unless host.is_a?(String) && !host.empty?
      raise ArgumentError, "sentinel #{entry.inspect} in redis option sentinels: has an invalid port" unless port.is_a?(Integer) && port.between?(1, 65_535)

      hash.merge(host: host, port: port).compact
    end

    def sentinel_from_string(text)
      uri = URI.parse(text.include?("://") ? text : "redis://#{text}")
      raise ArgumentError, "invalid sentinel #{text.inspect} in redis option sentinels:; give \"host:port\" or redis://host:port" unless uri.scheme == "redis" && uri.host

      {host: uri.host.delete_prefix("[").delete_suffix("]"), port: uri.port, password: uri.password && URI.decode_www_form_component(uri.password)}.compact
    rescue URI::InvalidURIError
      raise ArgumentError, "invalid sentinel #{text.inspect} in redis option sentinels:; give \"host:port\" or redis://host:port"
    end

    # sentinel_password: (or sentinel_username:), else the one every sentinel entry gives; the engine
    # sends one set of credentials to every sentinel.
    def sentinel_credential(entries, key)
      given = @options[:"sentinel_#{key}"]
      return given unless given.nil?

      values = entries.map { |e| e[key] }.uniq
      return values.first if values.size == 1

      raise ArgumentError, "sentinels with different #{key}s: the engine sends one to every sentinel; set sentinel_#{key}:"
    end

    def url_host
      URI.parse(base_url).host
    rescue URI::InvalidURIError
      nil
    end

    # VERIFY_NONE, given as OpenSSL's constant (0) or its name.
    def insecure?
      params = @options[:ssl_params] or return false
      mode = params[:verify_mode] || params["verify_mode"]
      return false if mode.nil?
      return false unless engine_scheme_tls?

      mode == 0 || mode.to_s.casecmp?("VERIFY_NONE") || mode.to_s.casecmp?("none")
    end

    def engine_scheme_tls?
      @options[:ssl] == true || (!@options.key?(:ssl) && base_url.start_with?("rediss:"))
    end

    def overridden_url
      return unix_url(@options[:path]) if @options.key?(:path)

      uri = URI.parse(base_url)
      raise ArgumentError, "redis options host:, port:, db: and ssl: need a redis:// or rediss:// URL, not #{uri.scheme}://" unless %w[redis rediss].include?(uri.scheme)

      uri.scheme = @options[:ssl] ? "rediss" : "redis" if @options.key?(:ssl)
      uri.host = @options[:host] if @options.key?(:host)
      uri.host = master_name if sentinel?
      uri.port = @options[:port] || uri.port || 6379 unless sentinel? # the master's port is the sentinels' answer
      uri.path = "/#{@options[:db]}" if @options.key?(:db)
      uri.to_s
    end

    def unix_url(path)
      @options.key?(:db) ? "unix://#{path}?db=#{@options[:db]}" : "unix://#{path}"
    end

    def with_password(url, password)
      if url.match?(/\A(redis\+)?unix:/)
        path, query = url.split("?", 2)
        params = URI.decode_www_form(query.to_s).reject { |key, _| key == "pass" }
        return "#{path}?#{URI.encode_www_form(params << ["pass", password.to_s])}"
      end

      uri = URI.parse(url)
      uri.userinfo = "#{uri.user}:#{URI.encode_www_form_component(password.to_s).gsub("+", "%20")}"
      uri.to_s
    end
  end
end
