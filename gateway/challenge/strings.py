"""Every sentence the challenge and block pages show, in one place, per language.

Pages pick the first language of the client's Accept-Language that is listed here and
fall back to English. To add a language, copy the "en" block and translate the values;
``{placeholders}`` must stay as they are.
"""

from __future__ import annotations

import functools

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "challenge_title": "Checking your browser",
        "challenge_heading": "One moment, please",
        "challenge_intro": "This site makes sure its visitors are people and not automated scrapers. "
                           "Your browser is solving a small puzzle; it takes a few seconds and is needed only once in a while.",
        "challenge_working": "Working…",
        "challenge_progress": "Working… {pct}%",
        "challenge_done": "Done. Taking you to the page…",
        "challenge_failed": "The check could not run in this browser. Reload the page to try again.",
        "post_lost": "The form you submitted was not sent. After this check, go back and submit it again.",
        "nojs_wait": "JavaScript is turned off, so this page uses a slower check instead: "
                     "you will be taken to the page in {seconds} seconds. If nothing happens, follow this link:",
        "nojs_continue": "Continue",
        "nojs_required": "JavaScript is turned off. This check needs JavaScript to run a short computation in your browser. "
                         "Please turn it on for this site, or use a browser that supports it.",
        "request_id": "Reference",
        "contact": "If you think this is a mistake, contact",
        "block_title": "Access denied",
        "block_heading": "Access denied",
        "block_text": "This request was blocked by the site's security policy.",
        "rate_title": "Too many requests",
        "rate_heading": "Slow down, please",
        "rate_text": "Too many requests came from your network in a short time. Wait a minute, then try again.",
        "verified_title": "Check passed",
        "verified_heading": "Thank you, you may continue",
        "verified_resubmit": "Your earlier form submission was not sent. Go back and submit it again.",
        "verified_link": "Continue to the site",
        "failed_title": "Check failed",
        "failed_heading": "The check did not succeed",
        "failed_text": "The check could not be verified ({reason}). Load the page again to get a new one.",
        "failed_link": "Try again",
        "not_found": "Not found",
    },
    "de": {
        "challenge_title": "Browser wird geprüft",
        "challenge_heading": "Einen Moment bitte",
        "challenge_intro": "Diese Website stellt sicher, dass ihre Besucher Menschen sind und keine automatischen Scraper. "
                           "Ihr Browser löst eine kleine Rechenaufgabe; das dauert wenige Sekunden und ist nur ab und zu nötig.",
        "challenge_working": "Wird berechnet…",
        "challenge_progress": "Wird berechnet… {pct} %",
        "challenge_done": "Fertig. Sie werden weitergeleitet…",
        "challenge_failed": "Die Prüfung konnte in diesem Browser nicht laufen. Laden Sie die Seite neu, um es erneut zu versuchen.",
        "post_lost": "Das abgeschickte Formular wurde nicht übertragen. Gehen Sie nach dieser Prüfung zurück und senden Sie es erneut.",
        "nojs_wait": "JavaScript ist ausgeschaltet, daher wird eine langsamere Prüfung verwendet: "
                     "Sie werden in {seconds} Sekunden weitergeleitet. Falls nichts passiert, folgen Sie diesem Link:",
        "nojs_continue": "Weiter",
        "nojs_required": "JavaScript ist ausgeschaltet. Diese Prüfung braucht JavaScript für eine kurze Berechnung in Ihrem Browser. "
                         "Bitte schalten Sie es für diese Website ein.",
        "request_id": "Referenz",
        "contact": "Wenn Sie dies für einen Fehler halten, wenden Sie sich an",
        "block_title": "Zugriff verweigert",
        "block_heading": "Zugriff verweigert",
        "block_text": "Diese Anfrage wurde durch die Sicherheitsrichtlinie der Website blockiert.",
        "rate_title": "Zu viele Anfragen",
        "rate_heading": "Bitte langsamer",
        "rate_text": "Aus Ihrem Netz kamen in kurzer Zeit zu viele Anfragen. Warten Sie eine Minute und versuchen Sie es dann erneut.",
        "verified_title": "Prüfung bestanden",
        "verified_heading": "Danke, Sie können fortfahren",
        "verified_resubmit": "Ihr früheres Formular wurde nicht übertragen. Gehen Sie zurück und senden Sie es erneut.",
        "verified_link": "Weiter zur Website",
        "failed_title": "Prüfung fehlgeschlagen",
        "failed_heading": "Die Prüfung war nicht erfolgreich",
        "failed_text": "Die Prüfung konnte nicht bestätigt werden ({reason}). Laden Sie die Seite erneut, um eine neue zu erhalten.",
        "failed_link": "Erneut versuchen",
        "not_found": "Nicht gefunden",
    },
    "fr": {
        "challenge_title": "Vérification du navigateur",
        "challenge_heading": "Un instant, s’il vous plaît",
        "challenge_intro": "Ce site vérifie que ses visiteurs sont des personnes et non des robots d’aspiration. "
                           "Votre navigateur résout un petit calcul ; cela prend quelques secondes et n’est demandé que de temps en temps.",
        "challenge_working": "Calcul en cours…",
        "challenge_progress": "Calcul en cours… {pct} %",
        "challenge_done": "Terminé. Redirection vers la page…",
        "challenge_failed": "La vérification n’a pas pu s’exécuter dans ce navigateur. Rechargez la page pour réessayer.",
        "post_lost": "Le formulaire envoyé n’a pas été transmis. Après cette vérification, revenez en arrière et renvoyez-le.",
        "nojs_wait": "JavaScript est désactivé ; une vérification plus lente est utilisée : "
                     "vous serez redirigé dans {seconds} secondes. Si rien ne se passe, suivez ce lien :",
        "nojs_continue": "Continuer",
        "nojs_required": "JavaScript est désactivé. Cette vérification a besoin de JavaScript pour un court calcul dans votre navigateur. "
                         "Activez-le pour ce site, s’il vous plaît.",
        "request_id": "Référence",
        "contact": "Si vous pensez qu’il s’agit d’une erreur, contactez",
        "block_title": "Accès refusé",
        "block_heading": "Accès refusé",
        "block_text": "Cette requête a été bloquée par la politique de sécurité du site.",
        "rate_title": "Trop de requêtes",
        "rate_heading": "Doucement, s’il vous plaît",
        "rate_text": "Trop de requêtes sont venues de votre réseau en peu de temps. Attendez une minute, puis réessayez.",
        "verified_title": "Vérification réussie",
        "verified_heading": "Merci, vous pouvez continuer",
        "verified_resubmit": "Votre formulaire précédent n’a pas été transmis. Revenez en arrière et renvoyez-le.",
        "verified_link": "Continuer vers le site",
        "failed_title": "Échec de la vérification",
        "failed_heading": "La vérification n’a pas abouti",
        "failed_text": "La vérification n’a pas pu être confirmée ({reason}). Rechargez la page pour en obtenir une nouvelle.",
        "failed_link": "Réessayer",
        "not_found": "Introuvable",
    },
}


@functools.lru_cache(maxsize=1024)
def pick_language(accept_language: str) -> str:
    """The first language of an Accept-Language header that has strings here ("en" otherwise).

    Cached: clients send a handful of distinct headers, and every challenged request asks.
    """
    ranked = []
    for i, part in enumerate(accept_language.split(",")[:16]):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        ranked.append((-q, i, tag.strip().lower().split("-")[0]))
    for _, _, lang in sorted(ranked):
        if lang in STRINGS:
            return lang
    return "en"
