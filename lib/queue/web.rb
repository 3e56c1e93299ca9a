# frozen_string_literal: true

require "rack"
require "rack/session/cookie"
require "securerandom"
require "json"
require_relative "../queue" unless defined?(JobQueue::Worker)
require_relative "web/template"
require_relative "web/router"
require_relative "web/page"
require_relative "metrics"

module JobQueue
  # The dashboard: a Rack app of server-rendered pages and a JSON API over what the engine stores.
  #
  #   # config/routes.rb
  #   mount JobQueue::Web => "/queue"
  #
  #   # or alone: `queue web --port 7433`
  #
  # `/metrics` under it answers Prometheus (JobQueue::Metrics).
  #
  # It uses the host's session when there is one (Rails); otherwise it keeps its own signed cookie,
  # signed with `JobQueue::Web.session_secret`. Every POST must carry the session's CSRF token.
  # Authentication is the host's (README, "Operating it: the dashboard").
  class Web
    ROOT = File.expand_path("web", __dir__)
    SESSION_KEY = "queue.web.session"

    class << self
      # Rack entry point: `mount JobQueue::Web => "/queue"` and `run JobQueue::Web` both work.
      def call(env) = instance.call(env)

      def instance = @instance ||= new

      # Signs the dashboard's own session cookie (used where the host has no session). Set it (or
      # QUEUE_WEB_SECRET) when several processes serve the dashboard, so a form served by one is
      # accepted by another; a random one is made otherwise.
      attr_writer :session_secret

      def session_secret
        @session_secret ||= ENV.fetch("QUEUE_WEB_SECRET") { SecureRandom.hex(64) }
      end
    end

    attr_reader :router

    def initialize(session_secret: self.class.session_secret)
      @router = Router.new
      Page.draw(@router)
      @with_session = Rack::Session::Cookie.new(method(:dispatch), key: SESSION_KEY, secret: session_secret,
        same_site: :strict, httponly: true, path: "/")
    end

    def call(env)
      # Prometheus scrapes with no session or token: /metrics is JobQueue::Metrics, read-only.
      return Metrics.call(env) if env["PATH_INFO"] == "/metrics"

      env["rack.session"] ? dispatch(env) : @with_session.call(env)
    end

    private

    def dispatch(env)
      request = Rack::Request.new(env)
      path = request.path_info.to_s.empty? ? "/" : request.path_info.chomp("/").then { |p| p.empty? ? "/" : p }
      action, params = @router.match(request.request_method, path)
      page = Page.new(request, params || {})
      return page.not_found(@router.path?(path) ? 405 : 404) unless action
      return page.forbidden unless request.get? || request.head? || page.csrf_valid?

      shard = page.shard
      shard ? Client.via(shard) { page.public_send(action) } : page.public_send(action)
    end
  end
end
