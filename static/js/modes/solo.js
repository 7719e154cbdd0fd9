// Solo: one model's answer. Its call streams into a card under "Answer"; once it is in, the
// answer is the run's answer card at the top and the stage card says so. `answer_complete`
// carries the whole text, so a reopened run reads the same.
export function createView(ctx) {
  const { ui } = ctx;
  const section = ctx.section("answer", "Answer");
  return {
    callSection() {
      return "answer";
    },
    event(name, data) {
      if (name === "answer_start") {
        section.running();
        ctx.progress("answering");
        return;
      }
      if (name !== "answer_complete" || !data.data) return;
      const a = data.data;
      const card = section.claim(a.model);
      card.setState("ok", { ms: a.responseTimeMs });
      card.setBody(ui.el("p", { class: "muted" }, "Its reply is the answer, shown first at the top."));
      const p = ctx.primary("Answer");
      p.head.replaceChildren("Answer", ui.el("span", { class: "muted" }, `by ${a.model}`));
      p.body.replaceChildren(ui.markdown(a.response));
      section.done();
    },
  };
}
