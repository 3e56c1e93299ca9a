# frozen_string_literal: true

require "mail_room"
require "mail_room/delivery/sidekiq"

# mail_room 0.0.9 (the Debian gem) delivers mail to Sidekiq by writing the job JSON to Redis itself
# (LPUSH queue:<name>, with class, args, queue, jid, retry false and enqueued_at, and no created_at);
# our server runs what it pushed. The delivery class is driven as mail_room's mailbox watcher
# drives it, without IMAP: a mailbox configured for the :sidekiq delivery, then `deliver(message)`.
RSpec.describe "mail_room's Sidekiq delivery" do
  let(:redis) { TestRedis.client }
  let(:mailbox) do
    MailRoom::Mailbox.new(
      name: "incoming", email: "incoming@example.com", password: "not used: no IMAP here",
      delivery_method: "sidekiq",
      delivery_options: {redis_url: TestRedis.url, queue: "email_receiver", worker: "EmailReceiverWorker"},
      logger: {file_path: File.join(TestRedis.dir, "mail_room.log")}
    )
  end
  let(:delivery) { MailRoom::Delivery::Sidekiq.new(MailRoom::Delivery::Sidekiq::Options.new(mailbox)) }

  def received = redis.lrange("mail_room:received", 0, -1).map { |r| JSON.parse(r) }

  [[{}, "JobQueue::Worker"], [{"MAIL_ROOM_APP_SHIM" => "1"}, "Sidekiq::Worker"]].each do |env, worker|
    it "pushes jobs (without created_at) that our server runs with the message as the argument of a #{worker}" do
      utf8 = "From: ana@example.com\r\nSubject: héllo ✓\r\n\r\nbody\r\n"
      latin1 = "From: bo@example.com\r\nSubject: caf\xE9 cr\xE8me br\xFBl\xE9e \xE0 la fran\xE7aise, d\xE9j\xE0 vu\r\n\r\nd\xE9j\xE0\r\n".b

      expect(delivery.deliver(utf8)).to be(true)
      expect(delivery.deliver(latin1)).to be(true)
      pushed = redis.lrange("queue:email_receiver", 0, -1).map { |j| JSON.parse(j) }.reverse
      expect(pushed.map(&:keys)).to all(contain_exactly("class", "args", "queue", "jid", "retry", "enqueued_at"))
      expect(pushed.map { |j| [j["class"], j["queue"], j["retry"]] }).to eq([["EmailReceiverWorker", "email_receiver", false]] * 2)

      server = ServerProcess.new(app: "mail_room_app.rb", args: ["-q", "email_receiver"], env: env).start
      runs = wait_until("both messages to be received") { (r = received).size >= 2 && r }
      expect(runs.map { |r| r["jid"] }).to match_array(pushed.map { |j| j["jid"] })
      expect(runs.map { |r| r["worker"] }).to eq([worker] * 2)
      by_jid = runs.to_h { |r| [r["jid"], r] }
      expect(by_jid[pushed[0]["jid"]]).to include("raw" => utf8, "encoding" => "UTF-8", "valid" => true)
      # mail_room converted the ISO-8859-1 message to UTF-8 (charlock_holmes) before pushing it.
      expect(by_jid[pushed[1]["jid"]]).to include("raw" => latin1.force_encoding("ISO-8859-1").encode("UTF-8"), "valid" => true)
      expect(redis.llen("queue:email_receiver")).to eq(0)
      expect(server.stop.exitstatus).to eq(0)
      expect(server.output).not_to match(/ERROR|invalid job/)
    ensure
      server&.ensure_stopped
    end
  end
end
